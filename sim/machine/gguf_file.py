"""The header of a GGUF file (metadata and tensor table), read without touching tensor data.

Reading goes through ``gguf.GGUFReader`` (the ``gguf`` package of llama.cpp's ``gguf-py``,
github.com/ggml-org/llama.cpp/tree/master/gguf-py), which memory-maps the file and computes each
tensor's byte size from ggml's block sizes (``GGML_QUANT_SIZES``). Its stock array parser walks a
tokenizer's 150k strings one Python call at a time (about 10 s for a Qwen3 vocabulary on a shared
2-core box), so :class:`HeaderReader` skips string arrays (keeping their length) and reads numeric
arrays in one slice; everything else is the package's own code. A split model
(``NAME-00001-of-0000N.gguf``, llama.cpp's ``gguf-split``) is read shard by shard: metadata from the
first, tensors from all.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SPLIT = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


class GgufError(ValueError):
    """A GGUF file that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the table: its name, ggml type (lower case, e.g. ``q4_k``), ggml shape
    (``ne0`` first), element count and bytes in the file."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    n_elements: int
    n_bytes: int


@dataclass(frozen=True)
class GgufHeader:
    """Metadata (scalars, strings, numeric arrays as lists), array lengths, and the tensor table
    of a GGUF model (every shard's tensors for a split model)."""

    path: str
    meta: dict
    array_len: dict
    tensors: tuple[TensorInfo, ...]
    shards: int = 1


@lru_cache(maxsize=1)
def _reader_class():
    """The reader class (built on first use: ``gguf`` is imported only when a GGUF model is read)."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType

    class HeaderReader(GGUFReader):
        """``GGUFReader`` whose arrays of strings are skipped (length kept) and numeric arrays read whole."""

        def _get_field_parts(self, orig_offs, raw_type):
            if GGUFValueType(raw_type) != GGUFValueType.ARRAY:
                return super()._get_field_parts(orig_offs, raw_type)
            itype, alen = self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)
            if len(itype) < 1 or len(alen) < 1:
                raise ValueError("metadata runs past the end of the file")
            sub, n, offs = GGUFValueType(int(itype[0])), int(alen[0]), orig_offs + 12
            if sub == GGUFValueType.STRING:
                end = _skip_strings(self.data, offs, n, ">" if self.byte_order == "S" else "<")
                return end - orig_offs, [itype, alen], [], [GGUFValueType.ARRAY, sub]
            nptype = self.gguf_scalar_to_np.get(sub)
            if nptype is None:                      # nested arrays: the package's own walk
                return super()._get_field_parts(orig_offs, raw_type)
            vals = self._get(offs, nptype, n)
            if len(vals) != n:
                raise ValueError("metadata array runs past the end of the file")
            return 12 + int(vals.nbytes), [itype, alen, vals], [2], [GGUFValueType.ARRAY, sub]

    return HeaderReader


def _skip_strings(data, offs: int, n: int, order: str) -> int:
    """The offset just past ``n`` length-prefixed strings starting at ``offs``."""
    buf, size, fmt = memoryview(data), len(data), order + "Q"
    unpack = struct.Struct(fmt).unpack_from
    if n > (size - offs) // 8:                      # a corrupt count: fewer bytes left than lengths
        raise ValueError(f"a string array of {n} items runs past the end of the file")
    for _ in range(n):
        if offs + 8 > size:
            raise ValueError("a string array runs past the end of the file")
        offs += 8 + unpack(buf, offs)[0]
    if offs > size:
        raise ValueError("a string array runs past the end of the file")
    return offs


def _read_one(path: Path):
    """(meta, array lengths, tensors) of one file; any failure is one :class:`GgufError` line."""
    if not path.is_file():
        raise GgufError(f"gguf:{path}: no such file")
    try:
        r = _reader_class()(str(path))
        meta, lens = {}, {}
        for name, f in r.fields.items():
            if f.types and f.types[0].name == "ARRAY":
                lens[name] = int(f.parts[4][0])     # key length, key, type, item type, count
            meta[name] = f.contents()
        tensors = tuple(TensorInfo(t.name, t.tensor_type.name.lower(), tuple(int(x) for x in t.shape),
                                   int(t.n_elements), int(t.n_bytes)) for t in r.tensors)
    except (ValueError, KeyError, IndexError, OSError, OverflowError) as exc:
        raise GgufError(f"gguf:{path}: not a readable GGUF file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    return meta, lens, tensors


def shard_paths(path: Path) -> list[Path]:
    """Every shard of the split model whose first shard is ``path`` (``[path]`` when not split)."""
    m = SPLIT.match(path.name)
    if not m:
        return [path]
    count = int(m["count"])
    if int(m["no"]) != 1:
        raise GgufError(f"gguf:{path}: give the first shard ({m['stem']}-00001-of-{m['count']}.gguf)")
    paths = [path.with_name(f"{m['stem']}-{i:05d}-of-{m['count']}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing and path.is_file():
        raise GgufError(f"gguf:{path}: split model of {count} shards; missing {', '.join(missing)}")
    return paths


def read_header(path) -> GgufHeader:
    """The header of the GGUF model at ``path`` (a file or the first shard of a split model)."""
    p = Path(path)
    paths = shard_paths(p)
    meta, lens, tensors = _read_one(paths[0])
    for shard in paths[1:]:
        tensors += _read_one(shard)[2]
    expected = meta.get("split.tensors.count")
    if len(paths) > 1 and expected is not None and int(expected) != len(tensors):
        raise GgufError(f"gguf:{p}: the shards hold {len(tensors)} tensors, split.tensors.count says {expected}")
    return GgufHeader(str(p), meta, lens, tensors, len(paths))
