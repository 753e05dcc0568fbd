"""Speed of ``model=gguf:PATH``: reading the header of a 21 GB GGUF file.

The file is written once into a temporary folder with Qwen3-30B-A3B's widths and Q4_K_M-like ggml
types (hidden 2048, 128 experts of width 768, a 151,936-token BPE tokenizer with its merges), 60
layers by default so that it holds 21 GB (19.6 GiB) of tensors; the tensor data is a hole (a sparse
file), so writing it costs seconds and no disk. Target: the header read and the spec built in under
2 s without touching tensor data: the page faults of the read are printed (touching the data through
the memory map would fault in millions of 4 KiB pages).

    python benchmarks/bench_gguf_read.py [--layers 60] [--experts 128] [--repeat 3] [--dir DIR] [--stock]

``--stock`` also times the package's own ``gguf.GGUFReader`` on the same file (it parses the
tokenizer's strings one by one).
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from sim.machine.gguf_file import read_header  # noqa: E402
from sim.machine.gguf_model import from_header  # noqa: E402
from tests.sim.gguf_files import gqa_moe  # noqa: E402

TARGET_S = 2.0


def main() -> None:
    """Write the file, then time reading its header and building the spec; one line each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=60)
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="folder for the file (default: a temporary one)")
    ap.add_argument("--stock", action="store_true", help="also time gguf.GGUFReader itself")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        path = Path(tmp) / "Qwen3-MoE-Q4_K_M.gguf"
        t0 = time.perf_counter()
        gqa_moe(path, "qwen3moe", layers=a.layers, hidden=2048, experts=a.experts, ffn=768, vocab=151936,
                head_norms=True, tokens=151936)
        st = path.stat()
        print(f"wrote {st.st_size / 2**30:.2f} GiB file ({st.st_blocks * 512 / 2**20:.1f} MiB on disk) "
              f"in {time.perf_counter() - t0:.1f} s")
        best_wall = best_cpu = float("inf")
        faults = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(a.repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            spec = from_header(read_header(path))
            best_wall, best_cpu = min(best_wall, time.perf_counter() - w0), min(best_cpu, time.process_time() - c0)
        print(f"read header + spec: {best_wall:.3f} s wall, {best_cpu:.3f} s CPU (best of {a.repeat}; target "
              f"< {TARGET_S} s) -> {'ok' if best_wall < TARGET_S else 'SLOW'}; "
              f"expert {spec['file_expert_bytes'] / 2**20:.3f} MiB ({spec['file_expert_types']}), "
              f"rest {spec['file_non_expert_bytes'] / 2**30:.3f} GiB")
        after = resource.getrusage(resource.RUSAGE_SELF)
        pages = (after.ru_minflt - faults.ru_minflt + after.ru_majflt - faults.ru_majflt) / a.repeat
        print(f"page faults per read: {pages:.0f} (<= {pages * 4 / 1024:.1f} MiB touched of "
              f"{st.st_size / 2**30:.2f} GiB, Python's own allocations included)")
        if a.stock:
            import gguf

            w0 = time.perf_counter()
            gguf.GGUFReader(path)
            print(f"gguf.GGUFReader alone: {time.perf_counter() - w0:.2f} s wall")


if __name__ == "__main__":
    main()
