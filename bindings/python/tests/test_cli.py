"""The package's ``inferscale`` command: the console script of
[project.scripts] (and ``python -m inferscale``) runs the C tool built into
the package, inferscale/_bin/inferscale, with the same arguments: its help,
its one-line errors, and encode, ask, verify and bench on the models of
$INFS_CACHE."""

import json
import os
import subprocess
import sys

import pytest

import inferscale as infs
from conftest import REPO

# The console script pip put next to the interpreter of the environment the
# package is installed in.
SCRIPT = os.path.join(os.path.dirname(sys.executable), "inferscale")
CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
SMOLLM2 = os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
MINILM = os.path.join(CACHE, "minilm")


def cli(*args, check=True, cwd=None):
    assert os.path.exists(SCRIPT), f"{SCRIPT}: the package is not installed with its console script"
    run = subprocess.run([SCRIPT, *args], capture_output=True, text=True, cwd=cwd)
    if check:
        assert run.returncode == 0, run.stderr
    return run


def test_the_command_is_the_c_tool_inside_the_package():
    tool = os.path.join(os.path.dirname(infs.__file__), "_bin", "inferscale")
    with open(tool, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    assert os.access(tool, os.X_OK)
    run = cli("--help")
    for command in ("encode", "ask", "bench", "eval", "verify", "plot"):
        assert f"\n  {command} " in run.stdout, run.stdout
    module = subprocess.run([sys.executable, "-m", "inferscale", "--help"], capture_output=True, text=True)
    assert module.returncode == 0 and module.stdout == run.stdout, module.stderr


@pytest.mark.parametrize("command,options,others", [
    ("encode", ["--store PATH", "--namespace NS", "--kv-dtype T", "--model PATH", "--quiet"], ["--max-tokens"]),
    ("ask", ["--store PATH", "--namespace NS", "--max-tokens N", "--full-recompute", "--compare", "--json FILE"],
     ["--sweep", "--plot"]),
    ("bench", ["--store PATH", "--questions FILE", "--k N", "--plot FILE.png", "--json FILE"], ["--compare"]),
])
def test_command_help_lists_its_options(command, options, others):
    run = cli(command, "--help")
    assert run.stdout.startswith(f"usage: inferscale {command} [options]"), run.stdout
    for option in options:
        assert f"\n  {option} " in run.stdout, (option, run.stdout)
    for option in others:
        assert option not in run.stdout, (option, run.stdout)


@pytest.mark.parametrize("args,message", [
    (["ask", "--bogus", "x"], "inferscale: unknown option --bogus (inferscale ask --help lists the options)"),
    (["bogus"], 'inferscale: unknown command "bogus"'),
    (["ask", "--limit", "3", "x"], "inferscale: ask: --limit does not apply"),
])
def test_usage_errors_are_one_line(args, message):
    run = cli(*args, check=False)
    assert run.returncode == 2 and run.stdout == "", run
    assert run.stderr.startswith(message) and run.stderr.count("\n") == 1, run.stderr


def test_a_missing_tool_is_one_line_and_status_1(tmp_path):
    code = ("import sys, inferscale.cli as cli; cli.TOOL = sys.argv[1]; sys.argv[1:] = ['--help']; "
            "raise SystemExit(cli.main())")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "no-tool")], capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout == "", run
    assert run.stderr == (f"inferscale: cannot run {tmp_path / 'no-tool'}: No such file or directory "
                          "(reinstall the package: pip install .)\n"), run.stderr


def test_encode_ask_verify_and_bench(tmp_path):
    assert os.path.exists(SMOLLM2) and os.path.isdir(MINILM), "run scripts/fetch-models.sh"
    with open(os.path.join(REPO, "examples", "memory", "facts.jsonl"), encoding="utf-8") as f:
        lines = [line for line in f if line.strip()][:12]
    (tmp_path / "facts.jsonl").write_text("".join(lines), encoding="utf-8")
    cli("encode", "facts.jsonl", "--store", "m.infs", "--quiet", cwd=tmp_path)
    assert "sound: 12 facts" in cli("verify", "m.infs", cwd=tmp_path).stdout
    ask = cli("ask", "--store", "m.infs", "--namespace", "maya", "-k", "3", "--max-tokens", "16",
              "What is the name of Maya's cat?", cwd=tmp_path)
    assert "Biscuit" in ask.stdout.split("\n")[0], ask.stdout
    bench = cli("bench", "--store", "m.infs", "--namespace", "maya", "--k", "1,2", "--json", "b.json",
                "--plot", "b.png", "What is Maya allergic to?", cwd=tmp_path)
    assert "injection, mean ms" in bench.stdout, bench.stdout
    summary = json.loads((tmp_path / "b.json").read_text())["summary"]
    assert [row["k"] for row in summary] == [1, 2], summary
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
