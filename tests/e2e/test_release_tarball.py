"""The release tarball (deploy/bundle.sh --release) works on its own: built from the build tree,
copied to a temp dir and unpacked there, nothing it loads resolves into the repository or the build
tree (ldd of every file, and the running server's /proc/PID/maps), `--version` names the project
version of CMakeLists.txt, and a CPU demo serve answers a chat completion and drains on SIGTERM.
The oracles are the sources (CMakeLists.txt, deploy/systemd), the loader and readelf, not bundle.sh.
"""
import os
import platform
import re
import shutil
import signal
import subprocess
import time

import httpx
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.path.realpath(os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(REPO, "build")))
BUNDLE = os.path.join(REPO, "deploy", "bundle.sh")
pytestmark = pytest.mark.timeout(180)  # the bundle takes ~30 s of a busy 2-core machine


def _project_version():
    text = open(os.path.join(REPO, "CMakeLists.txt")).read()
    return re.search(r"project\(sparkserve\s+VERSION\s+([0-9.]+)", text).group(1)


def _clean_env(**extra):
    """An environment that knows nothing of the checkout: no LD_LIBRARY_PATH, no build dir in PATH."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def _outside_checkout(path):
    real = os.path.realpath(path)
    return not any(real == d or real.startswith(d + os.sep) for d in (os.path.realpath(REPO), BUILD_DIR))


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    if not os.path.exists(os.path.join(BUILD_DIR, "bin", "sparkserve")):
        pytest.fail(f"{BUILD_DIR}/bin/sparkserve not built (set SPARKSERVE_BUILD_DIR)")
    out = tmp_path_factory.mktemp("release_out")
    t0 = time.time()
    proc = subprocess.run([BUNDLE, "--release", "--build-dir", BUILD_DIR, "--out-dir", str(out)],
                          capture_output=True, text=True, timeout=150,
                          env=dict(os.environ, SPARKSERVE_XZ_LEVEL="0"))
    assert proc.returncode == 0, proc.stderr
    print(f"bundle.sh --release: {time.time() - t0:.1f} s")
    name = f"sparkserve-{_project_version()}-{platform.machine()}"
    assert proc.stdout.strip() == str(out / f"{name}.tar.xz")
    # A user's copy: the tarball and its checksum alone in a fresh folder, unpacked there.
    user = tmp_path_factory.mktemp("release_user")
    for f in (f"{name}.tar.xz", f"{name}.tar.xz.sha256"):
        shutil.copy(out / f, user / f)
    check = subprocess.run(["sha256sum", "-c", f"{name}.tar.xz.sha256"], cwd=user, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    listing = subprocess.run(["tar", "-tJf", f"{name}.tar.xz"], cwd=user, capture_output=True, text=True, check=True)
    subprocess.run(["tar", "-xJf", f"{name}.tar.xz"], cwd=user, check=True)
    return {"name": name, "root": user / name, "members": listing.stdout.split()}


def test_layout(release):
    root, name = release["root"], release["name"]
    assert all(m == name or m.startswith(name + "/") for m in release["members"]), release["members"][:5]
    for b in ("sparkserve", "sparkserve-node"):
        assert os.access(root / "bin" / b, os.X_OK)
    assert sorted(os.listdir(root)) == ["INSTALL", "VERSION", "bin", "lib", "systemd"]
    libs = os.listdir(root / "lib")
    assert any(lib.startswith("libgrpc++.so") for lib in libs), libs
    # What the target brings itself is not carried (a copy of glibc would clash with its loader).
    assert not [lib for lib in libs if re.match(r"(libc|libm|ld-linux|libstdc\+\+|libgcc_s|libcuda)\.so", lib)], libs
    units = sorted(os.listdir(os.path.join(REPO, "deploy", "systemd")))
    assert units and sorted(os.listdir(root / "systemd")) == units
    for u in units:
        assert (root / "systemd" / u).read_bytes() == open(os.path.join(REPO, "deploy", "systemd", u), "rb").read()


def _needed_symbol_versions(root, prefix):
    best = (0,)
    for d in ("bin", "lib"):
        for f in os.listdir(root / d):
            out = subprocess.run(["readelf", "-W", "--dyn-syms", str(root / d / f)], capture_output=True,
                                 text=True, check=True).stdout
            for v in re.findall(prefix + r"_([0-9][0-9.]*[0-9])", out):
                best = max(best, tuple(int(x) for x in v.split(".")))
    return best


def test_install_says_what_the_target_needs(release):
    root, name = release["root"], release["name"]
    text = (root / "INSTALL").read_text()
    assert not re.search(r"@[A-Z_]+@", text), "a placeholder is left"
    assert f"tar -xJf {name}.tar.xz" in text and "bin/sparkserve serve" in text
    assert "systemctl enable --now sparkserve-node" in text and "systemd/sparkserve-node.service" in text
    glibc = _needed_symbol_versions(root, "GLIBC")
    glibcxx = _needed_symbol_versions(root, "GLIBCXX")
    stated = re.search(r"glibc ([0-9.]+) or newer and a libstdc\+\+ with GLIBCXX_([0-9.]+)", text)
    assert stated, text[:800]
    assert stated.group(1) == ".".join(map(str, glibc)) and stated.group(2) == ".".join(map(str, glibcxx))
    if "Debian 12" in text:
        assert glibc <= (2, 36) and glibcxx <= (3, 4, 30)  # bookworm's glibc and GCC 12's libstdc++
    version = (root / "VERSION").read_text()
    if "cuda: none" in version:
        assert "CPU-only build" in text
    else:
        assert "NVIDIA driver" in text and version.split("cuda: ")[1].strip() in text


def test_nothing_resolves_into_the_checkout(release):
    root = release["root"]
    bundled = set(os.listdir(root / "lib"))
    for d in ("bin", "lib"):
        for f in sorted(os.listdir(root / d)):
            path = str(root / d / f)
            dyn = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
            rpaths = re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.*)\]", dyn)
            assert rpaths == (["$ORIGIN/../lib"] if d == "bin" else ["$ORIGIN"]), (f, rpaths)
            ldd = subprocess.run(["ldd", path], capture_output=True, text=True, env=_clean_env(), cwd=root)
            assert ldd.returncode == 0, ldd.stdout + ldd.stderr
            assert "not found" not in ldd.stdout, (f, ldd.stdout)
            for soname, target in re.findall(r"^\s*(\S+) => (/\S+)", ldd.stdout, re.M):
                assert _outside_checkout(target), (f, soname, target)
                if soname in bundled:
                    assert os.path.realpath(target) == os.path.realpath(root / "lib" / soname), (f, soname, target)


def test_version(release, tmp_path):
    root = release["root"]
    want = f"sparkserve {_project_version()} (commit "
    out = subprocess.run([str(root / "bin" / "sparkserve"), "--version"], capture_output=True, text=True,
                         env=_clean_env(), cwd=tmp_path, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith(want), out.stdout + out.stderr
    assert out.stdout == (root / "VERSION").read_text()
    node = subprocess.run([str(root / "bin" / "sparkserve-node"), "--version"], capture_output=True, text=True,
                          env=_clean_env(), cwd=tmp_path, timeout=30)
    assert node.returncode == 0 and node.stdout.startswith(f"sparkserve-node {_project_version()} "), node.stdout
    # INSTALL's links into the PATH: the binary still finds lib/ from its real location.
    os.symlink(root / "bin" / "sparkserve", tmp_path / "sparkserve")
    linked = subprocess.run(["sparkserve", "--version"], capture_output=True, text=True, timeout=30,
                            env=_clean_env(PATH=f"{tmp_path}:/usr/bin:/bin"), cwd="/")
    assert linked.returncode == 0 and linked.stdout == out.stdout, linked.stderr


def test_cpu_demo_serve(release, tmp_path):
    sparkserve = str(release["root"] / "bin" / "sparkserve")
    env = _clean_env()
    made = subprocess.run([sparkserve, "demo-model", str(tmp_path / "demo"), "--shape", "tiny", "--quiet"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert made.returncode == 0, made.stderr
    proc = subprocess.Popen([sparkserve, "serve", str(tmp_path / "demo"), "--backend", "cpu", "--host", "127.0.0.1",
                             "--port", "0", "--max-seq-len", "256", "--max-batch", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://"), (line, proc.stderr.read() if proc.poll() is not None else "")
        url = line.strip().split(" ", 2)[2]
        deadline = time.time() + 30
        while httpx.get(url + "/health").status_code != 200:
            assert proc.poll() is None and time.time() < deadline, "server did not become ready"
            time.sleep(0.05)
        r = httpx.post(url + "/v1/chat/completions", timeout=60, json={
            "model": "demo", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] >= 1, body
        # Every file the running server has mapped (libraries, also dlopen'ed ones) is outside the checkout.
        maps = open(f"/proc/{proc.pid}/maps").read()
        files = {m.split(None, 5)[5] for m in maps.splitlines() if len(m.split(None, 5)) == 6}
        files = {f for f in files if f.startswith("/")}
        assert [f for f in files if not _outside_checkout(f)] == []
        assert any(f.startswith(str(release["root"] / "lib") + "/libgrpc") for f in files), sorted(files)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        assert rc == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bad_arguments_refused(tmp_path):
    bad = subprocess.run([BUNDLE, "--release", "--build-dir", BUILD_DIR, "--version", "1.0/../x",
                          "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--version '1.0/../x'" in bad.stderr, bad.stderr
    mixed = subprocess.run([BUNDLE, "--release", "--build-dir", BUILD_DIR, "--archive", str(tmp_path / "x.tar.xz")],
                           capture_output=True, text=True, timeout=30)
    assert mixed.returncode != 0 and "--out-dir" in mixed.stderr, mixed.stderr
    assert os.listdir(tmp_path) == []


def test_containerfile_builds_from_this_tarball(release):
    """CI has no container tool (deploy/container.sh builds and runs the image where podman or docker
    is): the Containerfile is checked against the tarball it is built from. Its ADD names the tarball bundle.sh wrote, the paths it uses exist in it,
    the CUDA base has the CUDA major version the binaries were compiled with, and the port it
    exposes is the one its default command serves on."""
    text = open(os.path.join(REPO, "deploy", "Containerfile")).read()
    lines = [ln.strip() for ln in re.sub(r"\\\n", " ", text).splitlines() if ln.strip() and not ln.startswith("#")]
    args = {}
    for ln in lines:
        m = re.match(r"ARG (\w+)(?:=(\S+))?$", ln)
        if m:
            args[m.group(1)] = m.group(2)
    args.update(VERSION=_project_version(), ARCH=platform.machine())
    expand = lambda s: re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], s)  # noqa: E731
    base = expand(next(ln for ln in lines if ln.startswith("FROM ")).split()[1])
    assert re.fullmatch(r"nvidia/cuda:\d+\.\d+\.\d+-runtime-ubuntu24\.04", base), base
    compiler = [os.path.join(BUILD_DIR, "CMakeFiles", d, "CMakeCUDACompiler.cmake")
                for d in os.listdir(os.path.join(BUILD_DIR, "CMakeFiles"))]
    compiler = [c for c in compiler if os.path.exists(c)]
    if compiler:
        cuda = re.search(r'CMAKE_CUDA_COMPILER_VERSION "(\d+)\.', open(compiler[0]).read()).group(1)
        assert base.split(":")[1].split(".")[0] == cuda, (base, cuda)
    add = next(ln for ln in lines if ln.startswith("ADD ")).split()
    assert expand(add[1]) == release["name"] + ".tar.xz" and add[2] == "/opt/", add
    # Paths under /opt/ that the RUN step and the entry point use: present in the unpacked tarball.
    run = expand(next(ln for ln in lines if ln.startswith("RUN ")))
    opt_paths = [p for p in re.findall(r"/opt/(\S+)", run) if "/" in p]  # files, not the /opt/sparkserve link
    assert len(opt_paths) >= 3, run
    for p in opt_paths:
        p = p.replace("sparkserve/", release["name"] + "/", 1) if p.startswith("sparkserve/") else p
        assert (release["root"].parent / p).exists(), p
    assert 'ENTRYPOINT ["sparkserve"]' in lines and "/usr/local/bin/" in run
    port = re.search(r"EXPOSE (\d+)", text).group(1)
    cmd = next(ln for ln in lines if ln.startswith("CMD "))
    assert f'"--port", "{port}"' in cmd and '"--host", "0.0.0.0"' in cmd, cmd
