"""write_report: the report of one node's sweep (tables, plots, flags) the Kubeflow UI shows."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from kfp import dsl
from kfp.dsl import HTML, Dataset, Input, Markdown, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def write_report(
    results: Input[Dataset],
    report_html: Output[HTML],
    report_md: Output[Markdown],
    plots: Output[Dataset],
):
    """Writes the sweep's report (loss tables, plots, flags, machine) the Kubeflow UI shows.

    Args:
        results: Results folder from collect_results.

    Returns:
        report_html: Self-contained HTML report (tables, plots, flags, machine).
        report_md: The same report as Markdown.
        plots: The PNG and SVG plots.
    """
    from sharebench.components import steps

    steps.write_report([results.path], report_html.path, report_md.path, plots.path)
