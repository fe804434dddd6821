"""Which container images a run may use: an allow-list of prefixes the site configures.

The replica and analysis tasks of a run execute its ``image`` (a run parameter the submitter picks);
the node steps never do (they run in the image the pipeline was compiled with). Still, a site decides
which images may run beside a node sharebench reconfigures: ``SHAREBENCH_IMAGE_ALLOW`` (comma-separated
prefixes) in the environment of ``sharebench submit`` and of the node step (from the ConfigMap
``sharebench-site``, key ``image-allow``, when the site creates it). Unset, the default is the
repository of the image the pipeline was compiled with.

A prefix matches at a boundary of the reference: ``ghcr.io/sharebench`` allows
``ghcr.io/sharebench/sharebench:1.0`` and ``ghcr.io/sharebench:1.0``, never ``ghcr.io/sharebench-evil/x``.
"""

from __future__ import annotations

from sharebench.errors import UserError

IMAGE_ALLOW_ENV = "SHAREBENCH_IMAGE_ALLOW"
SITE_CONFIGMAP = "sharebench-site"  # in the run namespace; the node step reads it as its environment
SITE_IMAGE_ALLOW_KEY = "image-allow"
_BOUNDARY = "/:@"


def repository(image: str) -> str:
    """``image`` without its tag or digest (``reg:5000/a/b:1.0`` -> ``reg:5000/a/b``)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: name.rfind(":")]
    return name


def allowed_prefixes(allow: str | None, default_image: str) -> tuple[str, ...]:
    """The prefixes of ``allow`` (the variable's text); the repository of ``default_image`` when unset or blank."""
    prefixes = tuple(p.strip() for p in (allow or "").split(",") if p.strip())
    return prefixes or (repository(default_image),)


def image_allowed(image: str, prefixes: tuple[str, ...]) -> bool:
    """True when ``image`` starts with one of ``prefixes`` at a boundary (``/``, ``:``, ``@`` or its end)."""
    for p in prefixes:
        if image == p or (image.startswith(p) and (p[-1] in _BOUNDARY or image[len(p)] in _BOUNDARY)):
            return True
    return False


def check_image(image: str, allow: str | None, default_image: str) -> str:
    """``image`` when the site allows it; else a one-line UserError naming it and the allowed prefixes."""
    prefixes = allowed_prefixes(allow, default_image)
    if not isinstance(image, str) or not image.strip() or not image_allowed(image.strip(), prefixes):
        source = IMAGE_ALLOW_ENV if (allow or "").strip() else f"default; set {IMAGE_ALLOW_ENV} to change"
        raise UserError(f"image {image!r} is not allowed here; allowed prefixes ({source}): {', '.join(prefixes)}")
    return image.strip()
