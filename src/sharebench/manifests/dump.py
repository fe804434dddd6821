"""One YAML style for every manifest and every embedded config: block style, lists indented under
their key, multi-line strings as literal blocks (readable embedded configs and dashboards)."""

from __future__ import annotations

import yaml


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(obj: object) -> str:
    """``obj`` as YAML in the manifests' style, keys in the order given."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)
