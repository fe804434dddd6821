"""compare_nodes: one report over the sweeps of several nodes."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List

from kfp import dsl
from kfp.dsl import HTML, Dataset, Input, Markdown, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def compare_nodes(
    results: Input[List[Dataset]],
    report_html: Output[HTML],
    report_md: Output[Markdown],
    plots: Output[Dataset],
):
    """Puts the sweeps of several nodes side by side in one report.

    Args:
        results: Results folders from collect_results, one per node, in the order the
            nodes were given; every other node is compared with the first.

    Returns:
        report_html: Self-contained HTML report with the nodes side by side.
        report_md: The same report as Markdown.
        plots: The PNG and SVG plots (overlaid per node).
    """
    from sharebench.components import steps

    steps.write_report([r.path for r in results], report_html.path, report_md.path, plots.path)
