"""The soak (tests/soak/soak.py) for one minute, as CI runs it: mixed clients, disconnects,
garbage, slowloris, oversized headers and a connection flood against the CPU demo model; the
server must end idle (no request, slot, KV page or HTTP request left), unharmed and consistent."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402


def test_one_minute_soak():
    build = os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(soak.REPO, "build"))
    figures, problems, log_path = soak.run(build, seconds=60, clients=64)
    assert not problems, (problems, figures, log_path)
