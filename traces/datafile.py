"""YAML data files that the tools read (points files, hardware profiles): plain data, never config.

Hydra's own configuration (``conf/``) may interpolate (``${out}``) and call resolvers; a data file
given by the user may not. :func:`load_data_yaml` parses with OmegaConf's YAML rules (``1e3`` is a
number, ``.inf`` is infinity) but never resolves: a string holding ``${...}`` (``${oc.env:HOME}``
would copy an environment variable into the outputs) is refused, naming the file and where it is.
A file that is not YAML, not readable or not UTF-8 is refused in one line naming the file.
"""
from __future__ import annotations

from pathlib import Path


class DataFileError(ValueError):
    """A data file that cannot be read as plain YAML data; the message names the file and where."""


def load_data_yaml(path: str | Path, key: str = "file"):
    """The plain Python data (dicts, lists, scalars) of the YAML file ``path``, without resolving
    anything; :class:`DataFileError` naming ``key=path`` otherwise."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"{key}={path}: {'is a folder' if path.is_dir() else 'no such file'}; give a YAML file")
    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except yaml.YAMLError as exc:
        where, what = yaml_error_text(exc)
        raise DataFileError(f"{key}={path}{where}: not valid YAML ({what})") from None
    except (OmegaConfBaseException, UnicodeDecodeError, OSError) as exc:
        raise DataFileError(f"{key}={path}: not readable as YAML data ({str(exc).splitlines()[0]})") from None
    refuse_interpolation(data, f"{key}={path}")
    return data


def refuse_interpolation(data, where: str, at: str = "") -> None:
    """:class:`DataFileError` for the first string of ``data`` (nested) that holds ``${``."""
    if isinstance(data, dict):
        for k, v in data.items():
            refuse_interpolation(v, where, f"{at}.{k}" if at else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            refuse_interpolation(v, where, f"{at}[{i}]")
    elif isinstance(data, str) and "${" in data:
        raise DataFileError(f"{where}: field '{at}': {data!r}: interpolations (${{...}}) are not allowed "
                            "in a data file; write the value itself")


def yaml_error_text(exc) -> tuple[str, str]:
    """``(" line N", problem)`` of a ``yaml.YAMLError`` (where is empty when the parser gives no mark):
    how every YAML file the tool reads reports a parse error in one line."""
    mark = getattr(exc, "problem_mark", None)
    return (f" line {mark.line + 1}" if mark is not None else "",
            getattr(exc, "problem", None) or str(exc).splitlines()[0])
