"""scripts/check-docs.py: every repository path the README and docs/ name
exists in this checkout, and the check fails on one that does not."""

import os
import shutil
import subprocess
import sys

from conftest import REPO

SCRIPT = os.path.join(REPO, "scripts", "check-docs.py")


def check(root):
    return subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)


def test_every_path_the_docs_name_exists():
    r = check(REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 missing paths" in r.stdout


def fake_repo(tmp_path, readme, page):
    (tmp_path / "docs" / "history").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "demo.sh").write_text("")
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "docs" / "page.md").write_text(page)
    (tmp_path / "docs" / "history" / "old.md").write_text("`scripts/gone.sh` was removed.\n")
    return str(tmp_path)


def test_a_missing_path_fails(tmp_path):
    root = fake_repo(tmp_path, "Run `scripts/demo.sh`; see [the page](docs/page.md#a-part-two).\n",
                     "## A part: two\n```sh\nscripts/demo.sh && build/tools/inferscale ask\n```\n"
                     "`scripts/demo.sh:12` and `scripts/*.sh` and ``ninja -C build tools/x``\n")
    r = check(root)
    assert r.returncode == 0, r.stdout  # history may name what is gone; build outputs are not checked
    for i, (bad, where) in enumerate((("`libinferscale/no_such.c`", "README.md:2: libinferscale/no_such.c"),
                                      ("[gone](docs/gone.md)", "README.md:2: docs/gone.md"),
                                      ("`scripts/*.py`", "README.md:2: scripts/*.py"),
                                      ("[part](docs/page.md#no-such-part)", "README.md:2: docs/page.md#no-such-part"))):
        root = fake_repo(tmp_path / str(i), "Run `scripts/demo.sh`.\n" + bad + "\n", "")
        r = check(root)
        assert r.returncode == 1 and where + " does not exist" in r.stdout, (bad, r.stdout)
    root = fake_repo(tmp_path / "code", "", "```sh\n# a comment, not a heading\npython3 scripts/missing.py\n```\n")
    r = check(root)
    assert r.returncode == 1 and "docs/page.md:3: scripts/missing.py" in r.stdout, r.stdout
