"""Store(..., remote=...): the remote tier on a real Redis server that the
tests start on a free loopback port (skipped without redis-server)."""

import os
import shutil
import socket
import subprocess
import time

import numpy as np
import pytest

import inferscale as infs
from conftest import put_random

SERVER = shutil.which("redis-server") or shutil.which("valkey-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as c:
            c.sendall(b"PING\r\n")
            return c.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def server(tmp_path):
    if not SERVER:
        pytest.skip("redis-server is not installed (scripts/setup.sh installs it)")
    d = tmp_path / "redis"
    d.mkdir()
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen([SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
                                 "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                                 "--logfile", "server.log"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if answers(port) or proc.poll() is not None:
                break
            time.sleep(0.02)
        if answers(port):
            break
        proc.kill()
        proc.wait()
    else:
        pytest.fail("redis-server did not start")
    yield proc, f"redis://127.0.0.1:{port}"
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_two_files_share_the_server_and_a_lost_file_comes_back(tmp_path, geometry, server):
    _, url = server
    rng = np.random.default_rng(7)
    with infs.Store.create(tmp_path / "a.infs", geometry, "test-model v1", remote=url) as a:
        ids = [put_random(a, "maya", 3, rng, text=f"fact {i}") for i in range(4)]
        a.delete("maya", ids[0])
    with infs.Store.open(tmp_path / "b.infs", remote=url) as b:
        assert list(b.list("maya")) == ids[1:]
        assert b.get("maya", ids[2]).text == "fact 2"
        assert b.geometry == geometry
    os.unlink(tmp_path / "a.infs")
    with infs.Store.open(tmp_path / "a.infs", remote=url, remote_timeout_ms=500) as a:
        a.prefetch("maya")
        assert a.count("maya") == 3 and a.get("maya", ids[3]).text == "fact 3"


def test_hostile_names_stay_apart(tmp_path, geometry, server):
    _, url = server
    rng = np.random.default_rng(8)
    names = ["u", "u}", "{u}", "u:ids", "*", "u%7D"]
    with infs.Store.create(tmp_path / "a.infs", geometry, "test-model v1", remote=url) as a:
        ids = {n: put_random(a, n, 2, rng) for n in names}
    with infs.Store.open(tmp_path / "b.infs", remote=url) as b:
        for n in names:
            assert list(b.list(n)) == [ids[n]]


def test_server_down_is_an_io_error_naming_it(tmp_path, geometry, server):
    proc, url = server
    rng = np.random.default_rng(9)
    with infs.Store.create(tmp_path / "a.infs", geometry, "test-model v1", remote=url,
                           remote_timeout_ms=300) as a:
        put_random(a, "maya", 2, rng)
        proc.kill()
        proc.wait()
        with pytest.raises(infs.IOFailureError, match=url.removeprefix("redis://")):
            put_random(a, "maya", 2, rng)
    with pytest.raises(infs.IOFailureError):
        infs.Store.open(tmp_path / "c.infs", remote=url)
    assert not (tmp_path / "c.infs").exists()


def test_bad_remote_options(tmp_path, geometry):
    with pytest.raises(infs.InvalidArgumentError, match="redis://"):
        infs.Store.create(tmp_path / "a.infs", geometry, "m", remote="http://127.0.0.1:1")
    with pytest.raises(infs.InvalidArgumentError, match="remote_prefix"):
        infs.Store.create(tmp_path / "a.infs", geometry, "m", remote="127.0.0.1:1", remote_prefix="a{b}")
    with pytest.raises(TypeError):
        infs.Store.create(tmp_path / "a.infs", geometry, "m", remote=5)
