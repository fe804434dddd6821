"""advise_pool: the pool advice from the run's own costs and the site's Prometheus, shown in the Kubeflow UI."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from kfp import dsl
from kfp.dsl import HTML, Dataset, Input, Markdown, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def advise_pool(
    results: Input[Dataset],
    query: dict,
    advice_md: Output[Markdown],
    advice_html: Output[HTML],
    advice: Output[Dataset],
):
    """Advises the GPU pool's layout from the run's measured costs and the site's usage in Prometheus.

    Args:
        results: Results folder from collect_results (the costs of the pool's GPU model).
        query: What is read and the target, one value: prometheus_url (the Prometheus holding
            dcgm-exporter's per-pod series), window (a duration ending at until: 24h, 168h), until ('' the
            step's start; epoch seconds or ISO 8601), step_s (seconds between samples), class_label (the
            label naming a pod's class: namespace, a team label), slo (the p95 slowdown target).

    Returns:
        advice_md: The advice as Markdown (recommended layout, each class's mode and p95, what was read).
        advice_html: The same advice as HTML, with the plot of today against the recommendation.
        advice: The advice folder: advice.json (layout and pod-to-GPU assignment), assignment.csv,
            advice.md/html/png.
    """
    from sharebench.components import steps

    steps.advise_pool(results.path, query, advice.path, {"md": advice_md.path, "html": advice_html.path})
