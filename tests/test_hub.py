"""A real JupyterHub on 127.0.0.1 carries the course: hub + configurable-http-proxy + two students.

`jupyterhub` with its DummyAuthenticator and SimpleLocalProcessSpawner, configurable-http-proxy
from npm (`make hub-tools`), each student's `jupyterhub-singleuser` from this environment:

- alice has no browser: she gets a token through the hub's REST API, starts her server, runs a
  kernel through the proxy's websocket and moves the explorer's x[0] slider with the comm
  message the page sends; `explorer.result` holds the step at the new x, derived by hand.
- bob uses Chromium: he logs in on the hub's login page, JupyterLab opens, a notebook with the
  explorer runs and ArrowRight on the x[0] slider changes `ex.result` in his kernel.

pytree-lab's server extension must be active in the single-user servers: the servers' own view
of their kernel websockets (the test-only probe extension, tests/serverprobe) shows
TCP_NODELAY set by pytree-lab's connection class.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hub_harness import HubLab, StudentKernel, log_in, start_hub

ACTIVE = "pytree_lab.server"


def _lesson_loss(x0: float) -> float:
    # x = [x0, 1], weight = [1, -1], bias = 0, target 3: prediction x0 - 1, loss (x0 - 1 - 3)^2
    return (x0 - 4.0) ** 2


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = start_hub(tmp_path_factory.mktemp("hub"), probe=True)
    try:
        yield h
    finally:
        h.stop()


def _probe_kernel_socket(student) -> dict:
    probe = student.api("GET", "/nodelay-probe")
    kernel_sockets = [w for w in probe["websockets"] if "Kernel" in w["handler"]]
    assert kernel_sockets, probe
    return {"probe": probe, "kernel_sockets": kernel_sockets}


def test_browserless_student_slider_round_trip_through_the_hub(hub):
    alice = hub.add_student("alice")
    seconds = alice.start_server()
    assert seconds > 0

    async def session():
        kernel = await StudentKernel(alice, alice.start_kernel()).connect()
        try:
            setup = await kernel.execute(
                "import os\n"
                "from pytree_lab import StepExplorer\n"
                "explorer = StepExplorer()\n"
                "print(explorer.sliders['x[0]'].model_id)"
            )
            assert setup["status"] == "ok", setup
            comm_id = setup["stdout"].strip().splitlines()[-1]
            before = await kernel.value("[explorer.result.loss, explorer.sliders['x[0]'].value]")
            rtt = await kernel.move_slider(comm_id, 2.5, seq=1)
            after = await kernel.value(
                "[explorer.result.loss, explorer.sliders['x[0]'].value, explorer.sliders['x[0]'].ack, "
                "[float(g) for g in explorer.result.grads['weight']], float(explorer.result.grads['bias'])]"
            )
            user = await kernel.value("os.environ.get('JUPYTERHUB_USER')")
            evidence = await kernel.execute(
                "from pytree_lab.course import check\n"
                "from pytree_lab.exercises import default_evidence\n"
                "check('squared_norm', 96.0)\n"
                "rec = default_evidence().to_json()\n"
                "print(rec['jupyterhub_user'], rec['checks'][-1]['jupyterhub_user'])"
            )
            probe = _probe_kernel_socket(alice)
            return before, rtt, after, user, evidence, probe
        finally:
            await kernel.close()

    before, rtt, after, user, evidence, probe = asyncio.run(session())
    assert before == [pytest.approx(4.0), 2.0]  # the lesson's loss 4 at x = [2, 1]
    assert rtt > 0
    loss, x0, ack, g_weight, g_bias = after
    assert x0 == 2.5 and ack == 1
    assert loss == pytest.approx(_lesson_loss(2.5)) == pytest.approx(2.25)
    # residual 1.5 - 3 = -1.5: d loss / d weight = 2 * -1.5 * x = [-7.5, -3], d / d bias = -3
    assert g_weight == pytest.approx([-7.5, -3.0]) and g_bias == pytest.approx(-3.0)
    assert user == "alice"
    assert evidence["status"] == "ok" and evidence["stdout"].split() == ["alice", "alice"]
    # pytree-lab's server extension in jupyterhub-singleuser: its connection class set TCP_NODELAY
    assert any(ACTIVE in name for name in probe["probe"]["setting_mro"]), probe["probe"]["setting_mro"]
    assert all(w["nodelay"] for w in probe["kernel_sockets"])
    assert probe["probe"]["pytree_lab_file"] and "widgets/pytree_lab" in probe["probe"]["pytree_lab_file"]


@pytest.mark.browser
def test_chromium_student_logs_in_and_moves_the_slider(hub, pw):
    from browser.harness import Timeouts, launch_chromium, open_notebook
    from browser.pages import slider_handle

    # the hub fixture is per module and the browser tests run last, so this test may get a hub
    # of its own: it starts alice's server too (a no-op when her test ran on this hub)
    hub.add_student("alice").start_server()
    bob = hub.add_student("bob")
    bob.start_server()
    lab = HubLab(bob)
    browser = launch_chromium(pw)
    try:
        page = browser.new_page()
        log_in(page, hub, "bob", timeout_ms=Timeouts.ms(Timeouts.PAGE_LOAD))
        nb = open_notebook(
            page,
            lab,
            "hub_smoke.ipynb",
            ["from pytree_lab import StepExplorer\nex = StepExplorer()", "ex"],
            wait_for=".ptl-slider",
        )
        try:
            assert nb.value("ex.result.loss") == pytest.approx(4.0)
            step = nb.value("ex.sliders['x[0]'].step")
            handle = slider_handle(nb.panel, "x[0]")
            handle.focus()
            page.keyboard.press("ArrowRight")
            x0 = nb.kernel.wait_for("ex.sliders['x[0]'].value", lambda v: v != 2.0)
            assert x0 == pytest.approx(2.0 + step)
            # the step follows the slider: read once the ack for the move is in
            nb.kernel.wait_for("ex.sliders['x[0]'].ack", lambda v: v >= 1)
            assert nb.value("ex.result.loss") == pytest.approx(_lesson_loss(x0), rel=1e-5)
            assert nb.value("__import__('os').environ['JUPYTERHUB_USER']") == "bob"
            # both students on the one hub, each with a ready server of their own
            users = {u["name"]: u for u in hub.api("GET", "/users")}
            assert {"alice", "bob"} <= set(users)
            assert all(users[n]["servers"][""]["ready"] for n in ("alice", "bob"))
        finally:
            nb.close()
    finally:
        browser.close()


LESSON = "pytree-lab/content/01_pytrees.ipynb"


def _dockerfile_steps() -> list[str]:
    """docs/hosting.md's Dockerfile.hub: its RUN commands, continuation lines joined."""
    from hub_harness import REPO

    page = (REPO / "docs" / "hosting.md").read_text()
    dockerfile = re.search(r"```dockerfile\n(.*?)```", page, re.S).group(1).replace("\\\n", " ")
    return [line[len("RUN ") :] for line in dockerfile.splitlines() if line.startswith("RUN ")]


@pytest.fixture(scope="module")
def course_image(tmp_path_factory):
    """What the hub image holds, made as docs/hosting.md makes it: the course by the Dockerfile's
    own clone command (from a bare copy of this repository's commits that serves partial clones,
    as GitHub does, in place of GitHub), and the image's Jupyter config, Binder's (postBuild's
    step) with the Dockerfile's culler beside it, in a Python environment's sys.prefix."""
    from hub_harness import REPO

    base = tmp_path_factory.mktemp("image")
    origin = base / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(REPO), str(origin)], check=True, timeout=300)
    subprocess.run(["git", "-C", str(origin), "config", "uploadpack.allowFilter", "true"], check=True, timeout=60)
    steps = _dockerfile_steps()
    course = base / "srv" / "pytree-lab"
    clone = next(s for s in steps if "git clone" in s)
    clone = clone.replace("https://github.com/<org>/pytree-lab", f"file://{origin}").replace(
        "/srv/pytree-lab", str(course)
    )
    subprocess.run(["sh", "-c", clone], check=True, timeout=300, capture_output=True)
    prefix = base / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    config = prefix / "etc" / "jupyter"
    config.mkdir(parents=True)
    script = (REPO / "binder" / "postBuild").read_text()
    step = script[script.index("<<'PY'\n") + len("<<'PY'\n") : script.index("\nPY\n")]
    subprocess.run([sys.executable, "-c", step, str(config / "jupyter_server_config.json")], check=True, timeout=60)
    cull = next(part for s in steps for part in s.split(" && ") if part.strip().startswith("printf") and "cull" in part)
    path = os.pathsep.join([str(prefix / "bin"), os.environ["PATH"]])
    subprocess.run(["sh", "-c", cull], env={**os.environ, "PATH": path}, check=True, timeout=60)
    # the image's own start page is Binder's, for a repository in the home (the bug a hub met)
    server = json.loads((config / "jupyter_server_config.json").read_text())["ServerApp"]
    assert server["default_url"] == "/lab/tree/content/01_pytrees.ipynb"
    return {"course": course, "config": config}


@pytest.fixture(scope="module")
def course_hub(course_image, tmp_path_factory):
    """docs/hosting.md's recipe: binder/first-login as the single-user command, the lesson in the
    student's copy as the hub's default URL, the image's course and Jupyter config."""
    from hub_harness import REPO

    recipe = (
        f"c.Spawner.cmd = [{str(REPO / 'binder' / 'first-login')!r}]\nc.Spawner.default_url = \"/lab/tree/{LESSON}\"\n"
    )
    env = {"PYTREE_LAB_COURSE": str(course_image["course"]), "JUPYTER_CONFIG_PATH": str(course_image["config"])}
    h = start_hub(tmp_path_factory.mktemp("course-hub"), extra_env=env, extra_config=recipe)
    try:
        yield h
    finally:
        h.stop()


def _missing_blobs(repo: Path) -> set[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--objects", "--all", "--missing=print"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return {line[1:] for line in out.splitlines() if line.startswith("?")}


def test_every_login_lands_on_the_first_lesson_even_the_first_and_after_a_home_reset(course_hub, course_image):
    import shutil
    import urllib.error
    import urllib.request

    from student_trees import leaks

    image = course_image["course"]

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def landing(student) -> str:
        req = urllib.request.Request(f"{student.server_url}/", headers={"Authorization": f"token {student.token}"})
        try:
            urllib.request.build_opener(Stay).open(req, timeout=60)
        except urllib.error.HTTPError as exc:
            assert exc.code in (301, 302), exc.code
            return exc.headers["Location"]
        raise AssertionError("the server did not send the student on")

    carol = course_hub.add_student("carol")
    home = carol.home
    assert not (home / "pytree-lab").exists()  # never logged in: nothing in her home yet
    carol.start_server()
    # the hub's default URL, over the image's own ServerApp.default_url (Binder's)
    assert landing(carol).split("?")[0].endswith(f"/user/carol/lab/tree/{LESSON}")
    lesson = carol.api("GET", f"/api/contents/{LESSON}?content=0")
    assert lesson["type"] == "notebook"  # the page it lands on opens, no "Could not find path"
    # no file of the image's course or of her copy holds a line of a reference solution, and her
    # git holds none: course_source/ and tests/ are neither checked out nor fetched
    assert (home / "pytree-lab" / "content" / "01_pytrees.ipynb").is_file()
    assert not (home / "pytree-lab" / "course_source").exists() and not (home / "pytree-lab" / "tests").exists()
    assert leaks(image) == [] and leaks(home) == []
    tree = subprocess.run(
        ["git", "-C", str(home / "pytree-lab"), "ls-tree", "-r", "HEAD", "course_source"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\n")
    blobs = {line.split()[2] for line in tree if line.strip()}
    assert blobs and blobs <= _missing_blobs(home / "pytree-lab")
    assert (
        subprocess.run(
            ["git", "-C", str(home / "pytree-lab"), "status", "--porcelain"], capture_output=True, text=True, timeout=60
        ).stdout
        == ""
    )  # a clean sparse checkout: nothing reads as deleted, so a pull restores nothing
    # her work is hers: a later login keeps it; after a home reset the course comes back
    (home / LESSON).write_text((home / LESSON).read_text().replace("Pytrees", "Pytrees (my notes)", 1))
    mine = (home / LESSON).read_text()
    carol.stop_server()
    carol.start_server()
    assert (home / LESSON).read_text() == mine
    carol.stop_server()
    shutil.rmtree(home / "pytree-lab")
    carol.start_server()
    assert landing(carol).split("?")[0].endswith(f"/user/carol/lab/tree/{LESSON}")
    assert (home / LESSON).read_bytes() == (image / "content" / "01_pytrees.ipynb").read_bytes()
    carol.stop_server()


@pytest.mark.browser
def test_a_first_login_in_chromium_opens_lesson_01(course_hub, pw):
    from browser.harness import launch_chromium

    dave = course_hub.add_student("dave")
    browser = launch_chromium(pw)
    try:
        page = browser.new_page()
        # the login spawns his server (the first login: first-login copies the course first)
        log_in(page, course_hub, "dave", timeout_ms=360_000)
        page.wait_for_url(f"**/user/dave/lab/tree/{LESSON}", timeout=120_000)
        page.wait_for_function(
            "(path) => { const w = window.jupyterapp.shell.currentWidget;"
            " return !!(w && w.context && w.context.path === path && w.context.isReady); }",
            arg=LESSON,
            timeout=120_000,
        )
        assert "Could not find path" not in page.inner_text("body")
        assert page.locator(".jp-Dialog").count() == 0
        title = page.evaluate("() => window.jupyterapp.shell.currentWidget.title.label")
        assert title == "01_pytrees.ipynb"
        assert (dave.home / LESSON).is_file()
    finally:
        browser.close()


def test_the_images_culler_is_in_the_config_jupyter_server_reads(course_image, tmp_path):
    # the Dockerfile's jupyter_server_config.py beside Binder's .json, in the environment's
    # config folder: `jupyter server --show-config` lists what the server will run with
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(JUPYTER_CONFIG_PATH=str(course_image["config"]), JUPYTER_CONFIG_DIR=str(tmp_path / "user-config"))
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter"), "server", "--show-config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    culler = shown.split("MappingKernelManager", 1)[1].split("\n\n", 1)[0]
    assert ".cull_idle_timeout = 1800" in culler and ".cull_interval = 300" in culler
    assert ".cull_connected = True" in culler
    assert ".default_url = '/lab/tree/content/01_pytrees.ipynb'" in shown  # Binder's, read from the same folder
