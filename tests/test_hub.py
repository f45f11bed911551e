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


def test_every_login_lands_on_the_first_lesson_even_the_first_and_after_a_home_reset(tmp_path):
    # the recipe of docs/hosting.md: binder/first-login as the single-user command, the lesson as
    # the default URL; the course "in the image" is a copy of content/
    import shutil
    import urllib.error
    import urllib.request

    from hub_harness import REPO

    image = tmp_path / "srv" / "pytree-lab"
    shutil.copytree(REPO / "content", image / "content", ignore=shutil.ignore_patterns("src", "solutions"))
    recipe = (
        f"c.Spawner.cmd = [{str(REPO / 'binder' / 'first-login')!r}]\nc.Spawner.default_url = \"/lab/tree/{LESSON}\"\n"
    )
    h = start_hub(tmp_path / "hub", extra_env={"PYTREE_LAB_COURSE": str(image)}, extra_config=recipe)

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

    try:
        carol = h.add_student("carol")
        home = tmp_path / "hub" / "home" / "carol"
        assert not (home / "pytree-lab").exists()  # never logged in: nothing in her home yet
        carol.start_server()
        assert landing(carol).split("?")[0].endswith(f"/user/carol/lab/tree/{LESSON}")
        lesson = carol.api("GET", f"/api/contents/{LESSON}?content=0")
        assert lesson["type"] == "notebook"  # the page it lands on opens, no "Could not find path"
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
    finally:
        h.stop()
