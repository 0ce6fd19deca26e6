"""rope_rotate against an independent numpy RoPE, and the GIL released
around calls into the library."""

import ctypes
import sys
import threading
import time

import numpy as np
import pytest

import inferscale as infs


def reference_rope(x: np.ndarray, positions, g: infs.Geometry) -> np.ndarray:
    """Textbook rotary embedding, no scaling, in float64."""
    x = x.astype(np.float64).copy()
    r = g.rotary_dim
    inv = g.rope_theta ** (-np.arange(0, r, 2, dtype=np.float64) / r)
    for t, p in enumerate(positions):
        ang = p * inv
        c, s = np.cos(ang), np.sin(ang)
        if g.rope_style == infs.RopeStyle.NEOX:
            a, b = x[t, :, : r // 2].copy(), x[t, :, r // 2: r].copy()
            x[t, :, : r // 2], x[t, :, r // 2: r] = a * c - b * s, b * c + a * s
        else:
            a, b = x[t, :, 0:r:2].copy(), x[t, :, 1:r:2].copy()
            x[t, :, 0:r:2], x[t, :, 1:r:2] = a * c - b * s, b * c + a * s
    return x


@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("rotary_dim", [16, 8])
def test_rope_rotate_matches_reference(style, rotary_dim):
    g = infs.Geometry(n_layers=1, n_kv_heads=2, head_dim=16, rotary_dim=rotary_dim, rope_style=style,
                      rope_theta=500000.0, kv_dtype="f32")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 16)).astype(np.float32)
    pos = [0, 1, 17, 1000, 65535]
    expect = reference_rope(x, pos, g)
    got = infs.rope_rotate(x.copy(), pos, g)
    np.testing.assert_allclose(got, expect, rtol=0, atol=2e-5 * np.abs(expect).max() * 10)
    # Past rotary_dim the head passes through unrotated.
    np.testing.assert_array_equal(got[..., rotary_dim:], x[..., rotary_dim:])


def test_rope_rotate_torch_tensor():
    torch = pytest.importorskip("torch")
    g = infs.Geometry(n_layers=1, n_kv_heads=1, head_dim=8, kv_dtype="f32")
    x = torch.randn(3, 1, 8)
    ref = reference_rope(x.numpy(), [3, 4, 5], g)
    infs.rope_rotate(x, [3, 4, 5], g)  # in place, by data pointer
    np.testing.assert_allclose(x.numpy(), ref, atol=1e-5)


def test_rope_rotate_errors():
    g = infs.Geometry(n_layers=1, n_kv_heads=1, head_dim=8, kv_dtype="f32")
    with pytest.raises(infs.RangeError, match="negative"):
        infs.rope_rotate(np.zeros((2, 1, 8), np.float32), [0, -1], g)
    with pytest.raises(ValueError, match="head_dim"):
        infs.rope_rotate(np.zeros((2, 1, 4), np.float32), [0, 1], g)
    with pytest.raises(infs.InvalidArgumentError, match="rotary_dim"):
        infs.rope_rotate(np.zeros((2, 1, 8), np.float32), [0, 1],
                         infs.Geometry(n_layers=1, n_kv_heads=1, head_dim=8, rotary_dim=3))


def _ticks_during_calls(call) -> int:
    """Runs call() three times in a worker thread while the main thread
    counts; returns the most counts seen during one call. With the switch
    interval made huge, the main thread can only run during a call that
    releases the GIL."""
    ticks = [0]
    done = threading.Event()
    during = []

    def worker():
        for _ in range(3):
            before = ticks[0]
            call()
            during.append(ticks[0] - before)
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        t = threading.Thread(target=worker)
        t.start()
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.0002)  # blocks, handing the GIL to the worker
        t.join()
    finally:
        sys.setswitchinterval(old)
    return max(during)


def test_gil_is_released_during_library_calls():
    g = infs.Geometry(n_layers=1, n_kv_heads=8, head_dim=128, kv_dtype="f32")
    x = np.ones((4096, 8, 128), dtype=np.float32)
    pos = np.arange(4096, dtype=np.int32)
    assert _ticks_during_calls(lambda: infs.rope_rotate(x, pos, g)) > 0

    # Control: the same call through ctypes.PyDLL, which keeps the GIL, lets
    # the main thread count nothing, so the measurement above means something.
    pylib = ctypes.PyDLL(infs.library_path())
    gc = g._to_c()
    args = (ctypes.c_void_p(x.ctypes.data), ctypes.c_int(0), ctypes.c_uint32(4096), ctypes.c_uint32(8),
            ctypes.c_void_p(pos.ctypes.data), ctypes.c_void_p(int(infs.ffi.cast("uintptr_t", gc))))
    assert pylib.infs_rope_rotate(*args) == 0
    assert _ticks_during_calls(lambda: pylib.infs_rope_rotate(*args)) == 0
