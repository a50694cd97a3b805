"""One-file models: `sparkserve pack` / `unpack` (quant/model_pack.h) and every model command on the file.

Oracles: the directory itself (unpack must give it back byte for byte; serve/run/score/inspect on the
file must equal the same command on the directory) and the `safetensors` library (it must open the
packed file and list the same tensors with the same bytes as the directory's files).
"""
import json
import os
import subprocess

import httpx
import pytest

from conftest import API_KEY, MODEL_NAME, SPARKSERVE, Server

safetensors = pytest.importorskip("safetensors")


def sparkserve(*args, check=True, timeout=300):
    p = subprocess.run([SPARKSERVE, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check:
        assert p.returncode == 0, (args, p.stderr)
    return p


def tree(d):
    """relative path -> bytes of every non-hidden file under d."""
    out = {}
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for f in files:
            if not f.startswith("."):
                p = os.path.join(root, f)
                out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out


def raw_tensors(path):
    """name -> (dtype, shape, bytes) as the safetensors library reads them."""
    from safetensors import safe_open
    out = {}
    with safe_open(str(path), framework="numpy") as f:
        for k in f.keys():
            s = f.get_slice(k)
            out[k] = (s.get_dtype(), tuple(s.get_shape()))
    return out


def tensor_bytes(path):
    """name -> raw bytes, read through the library's own header parse (offsets from safe_open's metadata)."""
    from safetensors import safe_open
    with safe_open(str(path), framework="numpy") as f:
        names = list(f.keys())
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    return {k: data[8 + n + header[k]["data_offsets"][0]:8 + n + header[k]["data_offsets"][1]] for k in names}


@pytest.fixture(scope="module")
def sharded_dir(model_dir, tmp_path_factory):
    """The e2e tiny model with its weights split into 3 shards (+ index), a template in a subfolder and
    a binary file (non-UTF-8: stored base64)."""
    from safetensors.numpy import load_file, save_file
    d = tmp_path_factory.mktemp("sharded")
    tensors = load_file(str(model_dir / "model.safetensors")) if _numpy_ok(model_dir) else None
    if tensors is None:
        pytest.skip("safetensors numpy cannot load this dtype")
    names = sorted(tensors)
    weight_map = {}
    for i in range(3):
        part = {k: tensors[k] for k in names[i::3]}
        fname = f"model-{i + 1:05d}-of-00003.safetensors"
        save_file(part, str(d / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in part})
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, open(d / "model.safetensors.index.json", "w"))
    for f in os.listdir(model_dir):
        if f != "model.safetensors":
            open(d / f, "wb").write(open(model_dir / f, "rb").read())
    os.makedirs(d / "additional_chat_templates")
    (d / "additional_chat_templates" / "plain.jinja").write_text("{{ messages[0]['content'] }}")
    (d / "calibration.bin").write_bytes(bytes(range(256)) * 3)
    (d / ".hidden").write_text("left out")
    return d


def _numpy_ok(model_dir):
    try:
        from safetensors.numpy import load_file
        load_file(str(model_dir / "model.safetensors"))
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def demo_dirs(tmp_path_factory):
    out = {}
    for recipe in ("bf16", "nvfp4-mixed"):
        d = tmp_path_factory.mktemp(f"demo_{recipe}") / "m"
        sparkserve("demo-model", d, "--shape", "tiny", "--recipe", recipe, "--quiet")
        out[recipe] = d
    return out


def pack(d, tmp_path, name="model.sparkserve"):
    f = tmp_path / name
    sparkserve("pack", d, f)
    return f


def test_pack_unpack_is_byte_identical(demo_dirs, model_dir, sharded_dir, tmp_path):
    for i, d in enumerate([*demo_dirs.values(), model_dir, sharded_dir]):
        f = pack(d, tmp_path, f"m{i}.sparkserve")
        out = tmp_path / f"unpacked{i}"
        sparkserve("unpack", f, out)
        want, got = tree(d), tree(out)
        assert sorted(got) == sorted(want), d
        for k in want:
            assert got[k] == want[k], (d, k)


def test_safetensors_library_lists_the_same_tensors(demo_dirs, sharded_dir, tmp_path):
    for i, d in enumerate([demo_dirs["nvfp4-mixed"], sharded_dir]):
        f = pack(d, tmp_path, f"s{i}.sparkserve")
        shards = [os.path.join(d, x) for x in os.listdir(d) if x.endswith(".safetensors")]
        want_meta, want_bytes = {}, {}
        for s in shards:
            want_meta.update(raw_tensors(s))
            want_bytes.update(tensor_bytes(s))
        assert raw_tensors(f) == want_meta
        assert tensor_bytes(f) == want_bytes
        from safetensors import safe_open
        with safe_open(str(f), framework="numpy") as h:
            md = h.metadata()
        assert md["sparkserve.digest"].startswith("sha256:")
        assert json.loads(md["sparkserve.file:config.json"]) == json.load(open(os.path.join(d, "config.json")))


def test_run_score_inspect_on_the_file_equal_the_directory(demo_dirs, sharded_dir, tmp_path):
    for i, d in enumerate([demo_dirs["bf16"], demo_dirs["nvfp4-mixed"], sharded_dir]):
        f = pack(d, tmp_path, f"r{i}.sparkserve")
        run = ["run", "--ids", "1,2,3,4", "--max-new", "8", "--json"]
        got, want = json.loads(sparkserve(run[0], f, *run[1:]).stdout), json.loads(sparkserve(run[0], d, *run[1:]).stdout)
        assert (got["ids"], got["text"]) == (want["ids"], want["text"])  # "spec" counts depend on timing
        score = ["score", "--ids", "5,6,7"]
        assert json.loads(sparkserve(score[0], f, *score[1:]).stdout) == json.loads(sparkserve(score[0], d, *score[1:]).stdout)
        di = json.loads(sparkserve("inspect", d, "--json").stdout)
        fi = json.loads(sparkserve("inspect", f, "--json").stdout)
        assert fi.pop("model_dir") == str(f)
        packed = fi.pop("packed")
        di.pop("model_dir")
        assert fi == di
        assert packed["digest"].startswith("sha256:") and packed["bytes"] == os.path.getsize(f)
        assert "config.json" in packed["embedded_files"]
        assert "packed file" in sparkserve("inspect", f).stdout


def greedy(url, prompt):
    r = httpx.post(url + "/v1/completions", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60,
                   json={"model": MODEL_NAME, "prompt": prompt, "max_tokens": 12, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def chat(url):
    r = httpx.post(url + "/v1/chat/completions", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60,
                   json={"model": MODEL_NAME, "messages": [{"role": "user", "content": "hello world"}],
                         "max_tokens": 12, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]


def test_serve_file_equals_serve_directory(model_dir, tmp_path):
    f = pack(model_dir, tmp_path)
    outs = []
    for target in (model_dir, f):
        s = Server(target)
        try:
            outs.append([greedy(s.url, p) for p in ("hello world", "the and you are")] + [chat(s.url)])
        finally:
            assert s.stop() == 0, s.stderr
    assert outs[0] == outs[1]


def flip(path, offset):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x01
    open(path, "wb").write(bytes(data))


def test_damaged_files_are_refused(model_dir, tmp_path):
    good = pack(model_dir, tmp_path, "good.sparkserve")
    data = open(good, "rb").read()
    n = int.from_bytes(data[:8], "little")

    cases = {}
    # A flipped byte in the tensor data, and in an embedded file's text (the header stays valid JSON).
    p = tmp_path / "flip_data.sparkserve"
    p.write_bytes(data)
    flip(p, len(data) - 100)
    cases[p] = "digest mismatch"
    p = tmp_path / "flip_file.sparkserve"
    p.write_bytes(data)
    at = data.index(b"eos_token_id", 8, 8 + n)
    flip(p, at)  # 'e' -> 'd'
    cases[p] = "digest mismatch"
    p = tmp_path / "truncated.sparkserve"
    p.write_bytes(data[:-1000])
    cases[p] = f"truncated at {len(data) - 1000} of {len(data)} bytes"
    p = tmp_path / "truncated_header.sparkserve"
    p.write_bytes(data[:n // 2])
    cases[p] = "truncated at"
    p = tmp_path / "appended.sparkserve"
    p.write_bytes(data + b"junk")
    cases[p] = "4 bytes appended after the last tensor"
    for path, message in cases.items():
        for cmd in (["run", path, "--ids", "1,2", "--max-new", "2"], ["inspect", path], ["unpack", path, tmp_path / "out"],
                    ["serve", path, "--port", "0"]):
            r = sparkserve(*cmd, check=False, timeout=60)
            assert r.returncode != 0, (cmd, r.stdout)
            assert message in r.stderr, (cmd, r.stderr)
    # A plain safetensors file is not a packed model.
    r = sparkserve("run", model_dir / "model.safetensors", "--ids", "1", check=False)
    assert r.returncode != 0 and "not a packed model" in r.stderr, r.stderr


def test_quantize_pack_writes_the_file(demo_dirs, tmp_path):
    src = demo_dirs["bf16"]
    f = tmp_path / "q.sparkserve"
    d = tmp_path / "q"
    common = ["--recipe", "nvfp4-mixed", "--no-calib", "--no-eval", "--quiet", "--threads", "1"]
    sparkserve("quantize", src, f, "--pack", *common)
    sparkserve("quantize", src, d, *common)
    assert not os.path.exists(str(f) + ".quantize-partial")
    unpacked = tmp_path / "q_unpacked"
    sparkserve("unpack", f, unpacked)
    assert tree(unpacked) == tree(d)
    # quantize also reads a packed source.
    packed_src = pack(src, tmp_path, "src.sparkserve")
    d2 = tmp_path / "q2"
    sparkserve("quantize", packed_src, d2, *common)
    assert tree(d2) == tree(d)


@pytest.mark.timeout(120)
def test_cluster_ships_shards_from_the_packed_file(demo_dirs, tmp_path):
    """The head reads the packed file and cuts the node's shard from it: TP=2 equals TP=1 on the directory."""
    from cluster_util import Node, node_flags, write_token
    d = demo_dirs["nvfp4-mixed"]
    f = pack(d, tmp_path, "tp.sparkserve")
    run = ["--ids", "5,6,7,8,9", "--max-new", "8", "--ignore-eos", "--json", "--spec", "off"]
    want = json.loads(sparkserve("run", d, *run).stdout)["ids"]
    token = write_token(tmp_path / "token", "pack-tp-token")
    node = Node(tmp_path, "packed", token_file=token)
    try:
        got = json.loads(sparkserve("run", f, *run, *node_flags([node], token)).stdout)["ids"]
    finally:
        node.stop()
    assert got == want
