"""A Word file's zip, sized before python-docx reads it.

python-docx holds every part of the package in memory and parses its XML
parts into trees that take many times their size, so a 1.4 MB file of 400 MB
of compressed XML took gigabytes. Here the sizes the zip's directory gives
its parts are added up first, and nothing is decompressed to do it (zipfile
refuses a part that unpacks to more than its entry says):

- every part together may unpack to ``max_file_mb``;
- the parts python-docx may parse (all but those whose content type is
  ``image/*``, which it keeps as bytes) to ``max_unpacked_mb``.

[Content_Types].xml is read only when the parts together pass
``max_unpacked_mb``, to tell the images from the rest.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

from .limits import IngestLimits
from .sections import Unreadable

_CONTENT_TYPES = "[Content_Types].xml"
_CT_NS = "{http://schemas.openxmlformats.org/package/2006/content-types}"


def check_package(data: bytes, limits: IngestLimits) -> None:
    """Refuse a Word file whose parts unpack past the caps (TooLarge), or that is not a zip (Unreadable)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
            total = sum(info.file_size for info in parts)
            limits.check_package(total)
            if total <= limits.unpacked_bytes:
                return
            types = _content_types(archive, limits)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError, SyntaxError) as exc:  # lxml: SyntaxError
        raise Unreadable(f"not a readable Word document ({type(exc).__name__})") from None
    limits.check_unpacked(sum(info.file_size for info in parts if not _is_image(info.filename, types)))


def _content_types(archive: zipfile.ZipFile, limits: IngestLimits) -> tuple[dict[str, str], dict[str, str]]:
    """(extension -> content type, part name -> content type), lower-case as OPC compares them."""
    from lxml import etree

    limits.check_unpacked(archive.getinfo(_CONTENT_TYPES).file_size)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    root = etree.fromstring(archive.read(_CONTENT_TYPES), parser=parser)
    defaults = {e.get("Extension", "").lower(): e.get("ContentType", "") for e in root.iter(f"{_CT_NS}Default")}
    overrides = {e.get("PartName", "").lower(): e.get("ContentType", "") for e in root.iter(f"{_CT_NS}Override")}
    return defaults, overrides


def _is_image(name: str, types: tuple[dict[str, str], dict[str, str]]) -> bool:
    defaults, overrides = types
    content_type = overrides.get(f"/{name}".lower())
    if content_type is None:
        content_type = defaults.get(PurePosixPath(name).suffix.lstrip(".").lower(), "")
    return content_type.lower().startswith("image/")
