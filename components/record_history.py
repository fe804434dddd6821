"""record_history: the run's results added to the history store and checked (issue 25); fails on a change."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from kfp import dsl
from kfp.dsl import Dataset, Input

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def record_history(
    results: Input[Dataset],
    store: str,
    pushgateway: str = "",
    s3_endpoint: str = "",
):
    """Adds the sweep's results folder to the history store, checks its node's newest run against its
    baseline and fails when a cell's loss changed (so a scheduled run fails visibly).

    Args:
        results: Results folder from collect_results.
        store: History store: a folder in the task's filesystem or s3://bucket/prefix.
        pushgateway: Prometheus Pushgateway URL (http(s)://HOST:9091) for the losses and the check; '' none.
        s3_endpoint: S3 API endpoint of an s3:// store (KFP's MinIO: http://minio-service.kubeflow:9000); '' AWS.
    """
    from sharebench.components import steps

    steps.record_history(results_dir=results.path, store=store, pushgateway=pushgateway, s3_endpoint=s3_endpoint)
