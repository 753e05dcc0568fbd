"""A run's code version names the uncommitted code it ran (not just ``+dirty``), untracked files too."""
import shutil
import subprocess

import pytest

from sim.run.code_hash import changed_files, dirty_suffix
from sim.run.identity import ROOT, code_version

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path):
    for rel, text in {"sim/policy.py": "A = 1\n", "conf/p.yaml": "a: 1\n", "docs/x.md": "doc\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "c")
    return tmp_path


def test_each_uncommitted_state_of_the_code_has_its_own_version(repo):
    assert dirty_suffix(repo) == ""
    (repo / "docs/x.md").write_text("other doc\n")            # not code: the runs are the same
    assert dirty_suffix(repo) == ""
    (repo / "sim/policy.py").write_text("A = 2\n")
    two = dirty_suffix(repo)
    (repo / "sim/policy.py").write_text("A = 3\n")
    three = dirty_suffix(repo)
    assert two.startswith("+dirty.") and len(two) == 19 and three.startswith("+dirty.") and two != three
    (repo / "sim/policy.py").write_text("A = 2\n")
    assert dirty_suffix(repo) == two                            # the same code, the same version
    (repo / "sim/new_policy.py").write_text("B = 1\n")         # untracked: a new module
    assert changed_files(repo) == ["sim/new_policy.py", "sim/policy.py"] and dirty_suffix(repo) not in ("", two)
    (repo / "sim/new_policy.py").unlink()
    (repo / "sim/policy.py").write_text("A = 1\n")
    assert dirty_suffix(repo) == ""
    (repo / "conf/p.yaml").unlink()                             # a deleted preset counts too
    assert changed_files(repo) == ["conf/p.yaml"] and dirty_suffix(repo).startswith("+dirty.")


def test_an_untracked_file_alone_makes_the_checkout_dirty(repo):
    """Before, only tracked changes counted: a new policy file left the version at the bare commit."""
    (repo / "sim/plugin.py").write_text("X = 1\n")
    assert changed_files(repo) == ["sim/plugin.py"] and dirty_suffix(repo).startswith("+dirty.")


def test_this_checkouts_version_is_its_commit_and_suffix():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    assert code_version() == head[:12] + dirty_suffix(ROOT)
