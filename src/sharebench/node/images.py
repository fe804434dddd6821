"""Which container images a run may use: an allow-list of prefixes the site configures.

The replica and analysis tasks of a run execute its ``image`` (a run parameter the submitter picks);
the node steps never do (they run in the image the pipeline was compiled with). Still, a site decides
which images may run beside a node sharebench reconfigures: ``SHAREBENCH_IMAGE_ALLOW`` (comma-separated
prefixes) in the environment of ``sharebench submit`` and of the node step (from the ConfigMap
``sharebench-site``, key ``image-allow``, when the site creates it). Unset, the default is the
repository of the image the pipeline was compiled with.

An image must first be a reference by the OCI distribution grammar (``[domain[:port]/]path[:tag][@digest]``,
checked by ``docker-image-py``, a port of distribution/reference's own expressions): ``ghcr.io/x/../y``,
a space, a shell's ``;`` or a newline are refused in one line before any prefix is compared. A prefix
then matches at a boundary of the reference: ``ghcr.io/sharebench`` allows
``ghcr.io/sharebench/sharebench:1.0`` and ``ghcr.io/sharebench:1.0``, never ``ghcr.io/sharebench-evil/x``.
"""

from __future__ import annotations

from docker_image import reference as oci

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


def reference_problem(image: str) -> str:
    """Why ``image`` is not an image reference by the OCI distribution grammar ('' when it is one)."""
    if not isinstance(image, str) or not image or len(image) > 512 or not image.isprintable() or " " in image:
        return "it is empty, longer than 512 characters or holds a space or a control character"
    try:
        oci.Reference.parse(image)
    except oci.InvalidReference as exc:
        return str(exc)
    return ""


def check_reference(image: str) -> str:
    """``image`` when it is an image reference (the OCI distribution grammar); else a one-line UserError."""
    problem = reference_problem(image)
    if problem:
        raise UserError(
            f"image {image!r} is not an image reference ({problem}); allowed: [REGISTRY[:PORT]/]PATH[:TAG][@DIGEST], "
            "lowercase path components joined by '/', e.g. ghcr.io/sharebench/sharebench:1.0"
        )
    return image


def image_allowed(image: str, prefixes: tuple[str, ...]) -> bool:
    """True when ``image`` is an image reference (:func:`reference_problem`) that starts with one of
    ``prefixes`` at a boundary (``/``, ``:``, ``@`` or its end)."""
    if reference_problem(image):
        return False
    for p in prefixes:
        if image == p or (image.startswith(p) and (p[-1] in _BOUNDARY or image[len(p)] in _BOUNDARY)):
            return True
    return False


def check_image(image: str, allow: str | None, default_image: str) -> str:
    """``image`` when it is an image reference (:func:`check_reference`) the site allows; else a one-line
    UserError naming it and what is allowed."""
    prefixes = allowed_prefixes(allow, default_image)
    if isinstance(image, str) and image:
        check_reference(image)
    if not isinstance(image, str) or not image or not image_allowed(image, prefixes):
        source = IMAGE_ALLOW_ENV if (allow or "").strip() else f"default; set {IMAGE_ALLOW_ENV} to change"
        raise UserError(f"image {image!r} is not allowed here; allowed prefixes ({source}): {', '.join(prefixes)}")
    return image
