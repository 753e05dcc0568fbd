"""Points files and other YAML data files: malformed ones refused in one line naming the file, the
point and the field; booleans and non-finite numbers are no measurements; no interpolation."""
import pytest

from sim.machine.specs import ConfigError
from sim.fidelity.points import load_points
from traces.datafile import DataFileError, load_data_yaml

RUN = "{policy: llamacpp, model: qwen3_30b_a3b, gpu: rtx4090, host: desktop_ddr5_2ch, link: pcie4_x16}"


def _pts(tmp_path, text):
    p = tmp_path / "pts.yaml"
    p.write_text(text)
    return p


def _one(measured="12.5", run=RUN, extra=""):
    return f"points:\n  - {{id: X1, measured_tok_s: {measured}, source: s, grade: A, run: {run}{extra}}}\n"


@pytest.mark.parametrize("text,message", [
    (_one("true"), "points[0] (X1): measured_tok_s must be a number > 0 (finite, not true/false), got True"),
    (_one(".inf"), "points[0] (X1): measured_tok_s must be a number > 0 (finite, not true/false), got inf"),
    (_one(".nan"), "points[0] (X1): measured_tok_s must be a number > 0 (finite, not true/false), got nan"),
    ("points:\n  - 5\n", "points[0]: must be a mapping of id, measured_tok_s, source, grade, run, got 5"),
    (_one(run="7"), "points[0] (X1): field 'run': must be a mapping of run keys, got a int (7)"),
    (_one(run="{cache_ratio: true}"), "points[0] (X1): field 'run.cache_ratio': cache_ratio=True: must be a number in 0..1"),
    (_one(run="{gpu.vram_gib: .inf}"), "points[0] (X1): field 'run.gpu.vram_gib': must be a finite number, got inf"),
    (_one(run="{policy: [a, b]}"), "points[0] (X1): field 'run.policy': must be a single value, got ['a', 'b']"),
    (_one(extra=", grade2: B"), "points[0] (X1): unknown key(s) ['grade2']; allowed: id, measured_tok_s"),
    ("points:\n  - {id: X1, measured_tok_s: 3, source: s, run: {}}\n", "points[0] (X1): missing key 'grade'"),
    (_one() + "ratios:\n  - {id: R, num: X1}\n", "ratios[0]: must be a mapping with keys id, num, den"),
])
def test_malformed_points_name_the_file_point_and_field(tmp_path, text, message):
    path = _pts(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_points(path)
    assert str(exc.value).startswith(f"{path}: {message}") and "\n" not in str(exc.value)


@pytest.mark.parametrize("text,message", [
    ("[1, 2]\n", "must be a mapping with a 'points:' list (and optional 'ratios:'), got a list"),
    ("points: {a: 1}\n", "'points' must be a list of mappings, got a dict ({'a': 1})"),
    ("points: [\n", "line 2: not valid YAML"),
    (_one(extra=', note: "${oc.env:HOME}"'), "field 'points[0].note': '${oc.env:HOME}': interpolations"),
])
def test_malformed_points_files_are_one_line(tmp_path, text, message):
    path = _pts(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_points(path)
    assert str(exc.value).startswith(f"points={path}") and message in str(exc.value)


def test_a_good_points_file_loads_exactly(tmp_path):
    pf = load_points(_pts(tmp_path, _one("12") + "ratios:\n  - {id: R, num: X1, den: X1}\n"))
    p = pf.points[0]
    assert (p.id, p.measured_tok_s, p.source, p.grade, p.note) == ("X1", 12.0, "s", "A", "")
    assert isinstance(p.measured_tok_s, float) and p.run["gpu"] == "rtx4090" and pf.ratios[0].den == "X1"


def test_data_yaml_is_never_resolved(tmp_path, monkeypatch):
    """A hardware profile (``real run hardware=FILE``) with an environment variable: refused, and the
    variable's value appears nowhere; a literal value parses as OmegaConf does (1e3 is a number)."""
    monkeypatch.setenv("SECRET_QA", "s3cret")
    p = tmp_path / "hw.yaml"
    p.write_text("name: mine\ngpu: {vram_gib: '${oc.env:SECRET_QA}'}\n")
    with pytest.raises(DataFileError) as exc:
        load_data_yaml(p, "hardware")
    assert "field 'gpu.vram_gib'" in str(exc.value) and "s3cret" not in str(exc.value)
    p.write_text("name: mine\nbw: 1e3\nlist: [1, .inf]\n")
    assert load_data_yaml(p, "hardware") == {"name": "mine", "bw": 1000.0, "list": [1, float("inf")]}
    with pytest.raises(DataFileError, match=r"hardware=.*: is a folder; give a YAML file"):
        load_data_yaml(tmp_path, "hardware")
