"""What sharebench deploys on a cluster, from one source: namespaces and RBAC (``access``), the
gpu-operator's device-plugin and mig-parted configs and Helm values (``operator``), the DCGM
metrics, ServiceMonitor and Grafana dashboard (``monitoring``); ``render`` writes and checks
``manifests/``. Nothing here talks to a cluster."""
