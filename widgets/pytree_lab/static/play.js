// @ts-check
// PlayControl (pytree_lab.explorer.playbar): Play / Pause, speed and the step number shown.
//
// Traits (same names in playbar.py), all the kernel's: playing, steps_per_second, step, frame,
// message, rates. The page writes none: the person's wishes go to the kernel as messages
// ({type: "play"}, {type: "pause"}, {type: "rate", value}), and the button shows what the kernel
// says (never what was clicked before the kernel agreed).
//
// The acknowledgement: when `frame` changes (the kernel sent played step `frame` and all of its
// views before it), this view waits for the browser's next paint and answers
// {type: "drawn", frame}; the kernel computes the next step only then, so it never runs more
// than one step ahead of what is drawn. A view drawn later (a reload) answers the frame it finds.
//
// All text goes through textContent: the message may quote the person's paths.

/**
 * @typedef {{ playing: boolean, steps_per_second: number, step: number, frame: number,
 *             message: string, rates: number[] }} Model
 */

/** @type {import("@anywidget/types").Render<Model>} */
function render({ model, el }) {
  const unwatchKernel = watchKernel(model, el);
  const root = h("div", "ptl-play");
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", "play training");
  keepKeys(root);
  const button = h("button", "ptl-play-button");
  button.type = "button";
  const speedLabel = h("label", "ptl-play-speed");
  const select = h("select", "ptl-play-select");
  speedLabel.append(select, h("span", "", " steps/s"));
  const step = h("span", "ptl-play-step");
  step.setAttribute("aria-live", "off");
  const message = h("span", "ptl-play-message");
  message.setAttribute("role", "status");
  root.append(button, speedLabel, step, message);
  el.append(root);

  button.addEventListener("click", () => {
    model.send({ type: model.get("playing") ? "pause" : "play" });
  });
  select.addEventListener("change", () => {
    model.send({ type: "rate", value: Number(select.value) });
  });

  function draw() {
    const playing = model.get("playing");
    button.textContent = playing ? "❚❚ Pause" : "▶ Play";
    button.setAttribute("aria-label", playing ? "Pause training" : "Play training: take steps one after another");
    button.title = playing ? "stop taking steps" : "take steps one after another, every view following";
    button.classList.toggle("ptl-play-on", playing);
    root.dataset.playing = String(playing);
    const rates = model.get("rates") || [];
    const rate = model.get("steps_per_second");
    if (select.options.length !== rates.length) {
      select.replaceChildren(...rates.map((r) => {
        const option = h("option", "", String(r));
        option.value = String(r);
        return option;
      }));
    }
    select.value = String(rate);
    select.setAttribute("aria-label", "playing speed in steps per second");
    step.textContent = `step ${model.get("step")}`;
    step.dataset.step = String(model.get("step"));
    message.textContent = model.get("message");
  }

  /** After the next paint: tell the kernel the newest played step is on screen. */
  function acknowledge() {
    const frame = model.get("frame");
    if (!frame) return;
    requestAnimationFrame(() => setTimeout(() => {
      if (model.get("frame") === frame) model.send({ type: "drawn", frame });
    }, 0));
  }

  draw();
  acknowledge();
  model.on("change", draw);
  model.on("change:frame", acknowledge);
  return () => {
    model.off("change", draw);
    model.off("change:frame", acknowledge);
    unwatchKernel();
  };
}

export default { render };
