"""plot_loss: plots and the report of one node's sweep."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from kfp import dsl
from kfp.dsl import HTML, Dataset, Input, Markdown, Output

from sharebench.components._image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def plot_loss(
    results: Input[Dataset],
    report_html: Output[HTML],
    report_md: Output[Markdown],
    plots: Output[Dataset],
):
    """Draws loss, time and throughput plots and writes the report the Kubeflow UI shows.

    Args:
        results: Results folder from collect_results.

    Returns:
        report_html: Self-contained HTML report (tables, plots, flags, machine).
        report_md: The same report as Markdown.
        plots: The PNG and SVG plots.
    """
    from sharebench.components import steps

    steps.plot_loss([results.path], report_html.path, report_md.path, plots.path)
