"""The include graph between top-level folders follows DESIGN.md §2's table of allowed directions,
and nothing else: every `#include "folder/..."` in a source file of another folder must be an
allowed edge, and the scheduler sees only model's plan types (no tensors, no CUDA). The table is read
from ../shared/docs/DESIGN.md, the one place it is written; it must itself be acyclic."""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DESIGN = os.path.join(REPO, "..", "shared", "docs", "DESIGN.md")
SOURCE_EXT = (".h", ".cc", ".cu", ".cuh", ".inc")
# Not layers: tests, build outputs (build, build-fuzz, build-tsan: .gitignore's /build*/), deploy scripts,
# generated code.
NOT_LAYERS = {"tests", "deploy", "cmake", "build", ".git", ".ci"}
# What "model (plan types and capacities; no tensors, no CUDA)" means for the scheduler.
MODEL_PLAN_HEADERS = {"model/step_plan.h", "model/capacity.h", "model/row_sampling.h"}


def allowed_directions():
    text = open(DESIGN, encoding="utf-8").read()
    section = text[text.index("Allowed include directions"):]
    table = {}
    for line in section.splitlines()[1:]:
        m = re.match(r"^\|\s*([a-z]+)\s*\|\s*(.+?)\s*\|$", line)
        if m is None:
            if table and not line.startswith("|"):
                break
            continue
        folder, deps = m.group(1), m.group(2)
        if folder == "folder":
            continue
        deps = re.sub(r"\([^)]*\)", "", deps)  # "(codecs)", "(plan types)": notes, not folders
        table[folder] = {d.strip() for d in deps.split(",") if d.strip() and d.strip() != "-"}
    assert table, f"no direction table found in {DESIGN}"
    if "all of the above" in table.get("head", set()):
        table["head"] = set(table) - {"head"}
    return table


def include_edges(repo=REPO):
    """(from folder, included path, file) for every quoted include of another top-level folder."""
    folders = {d for d in os.listdir(repo) if os.path.isdir(os.path.join(repo, d)) and d not in NOT_LAYERS
               and not d.startswith((".", "build"))}
    edges = []
    for top in sorted(folders):
        for root, _, files in os.walk(os.path.join(repo, top)):
            for f in files:
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(root, f)
                for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(path, encoding="utf-8").read(), re.M):
                    other = inc.split("/", 1)[0]
                    if "/" in inc and other in folders and other != top:
                        edges.append((top, inc, os.path.relpath(path, repo)))
    return folders, edges


def test_design_table_is_acyclic():
    table = allowed_directions()
    state = {}

    def visit(n, path):
        if state.get(n) == "done":
            return
        assert state.get(n) != "open", f"DESIGN.md's allowed directions have a cycle: {' -> '.join(path + [n])}"
        state[n] = "open"
        for d in table.get(n, ()):
            visit(d, path + [n])
        state[n] = "done"

    for n in table:
        visit(n, [])


def test_every_folder_is_a_layer_of_the_table():
    table = allowed_directions()
    folders, _ = include_edges()
    missing = sorted(folders - set(table))
    assert not missing, f"top-level folders missing from DESIGN.md §2's table: {missing}"


def test_includes_follow_the_allowed_directions():
    table = allowed_directions()
    _, edges = include_edges()
    bad = [f"{f}: {top} -> {inc}" for top, inc, f in edges if inc.split("/", 1)[0] not in table.get(top, set())]
    assert not bad, "includes against DESIGN.md §2's directions:\n" + "\n".join(bad)


def test_scheduler_sees_only_model_plan_types():
    _, edges = include_edges()
    bad = [f"{f}: {inc}" for top, inc, f in edges
           if top == "scheduler" and inc.startswith("model/") and inc not in MODEL_PLAN_HEADERS]
    assert not bad, "the scheduler may include only model's plan types " + str(sorted(MODEL_PLAN_HEADERS)) + ":\n" + \
        "\n".join(bad)


def test_a_back_edge_is_caught(tmp_path):
    # The check itself can fail: a core file that includes model/ is reported, model -> core is not.
    fake = tmp_path / "repo"
    (fake / "core").mkdir(parents=True)
    (fake / "model").mkdir()
    (fake / "core" / "x.h").write_text('#include "model/config.h"\n')
    (fake / "model" / "y.h").write_text('#include "core/x.h"\n')
    _, edges = include_edges(str(fake))
    table = allowed_directions()
    bad = [(top, inc) for top, inc, _ in edges if inc.split("/", 1)[0] not in table.get(top, set())]
    assert bad == [("core", "model/config.h")]
