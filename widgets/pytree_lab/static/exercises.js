// @ts-check
// Exercise widgets: check button, prediction prompt, quiz, evidence button (pytree_lab.exercises).
//
// Python owns every result. The browser sends only intents and the student's own input:
//   model.send({type: "check"})   CheckButton: check the answer
//   model.send({type: "check", selected})  Quiz: submit the chosen answer
//   model.send({type: "reveal", prediction})  PredictionPrompt: reveal the computed answer
//   model.send({type: "save"})    EvidenceButton: write the evidence file
//   model.send({type: "solution"}) CheckButton: show the reference solution (Python refuses it
//                                  before a first check)
//   writes `prediction` and `self_rating` (PredictionPrompt, the student's own text and rating)
//   and `selected` (Quiz, choice index); Python refuses page writes to any other trait, and
//   ignores a new `selected` once the quiz is answered (the first answer counts). An intent
//   carries the input it acts on: ipywidgets holds a trait write back while an earlier write is
//   still pending, and a custom message sent after it would otherwise arrive first.
//
// Every string reaches the page through textContent: feedback can quote the student's answer.

/**
 * @typedef {{
 *   kind: "check" | "predict" | "quiz" | "evidence",
 *   title: string, announcement: string, busy: boolean,
 *   exercise_id: string, task: string, label: string, status: string, feedback: string, score: number,
 *   attempts: number, failed_attempts: number, solution_available: boolean, solution: string,
 *   prompt: string, prediction: string, self_rating: string, revealed: boolean, answer: string,
 *   question: string, choices: string[], selected: number, answered: boolean, correct: boolean,
 *   answer_index: number, explanation: string, choice_notes: string[], saved_path: string,
 * }} Model
 * @typedef {import("@anywidget/types").AnyModel<Model>} ExerciseModel
 */

// Ids and radio-group names are unique per view: each widget loads its own copy of this module,
// so a module counter alone repeats across widgets (two quizzes would share one radio group).
let uid = 0;
const unique = (/** @type {string} */ stem) => `${stem}-${++uid}-${Math.random().toString(36).slice(2, 10)}`;

/**
 * The announcement region: polite, so a result is read after what the student is doing.
 * `details` (a revealed answer, an explanation) sit inside it and are read with the verdict.
 * @param {HTMLElement[]} details
 */
function liveRegion(...details) {
  // focusable from script only: where the focus goes when the button that had it is locked
  const region = h("div", { class: "ptl-ex-live", role: "status", "aria-live": "polite", tabindex: "-1" });
  const status = h("p", { class: "ptl-ex-status" });
  region.append(status, ...details);
  return { region, status };
}

/**
 * A button that waits for the kernel stays focusable (aria-disabled, clicks ignored), so the
 * focus does not fall to <body> while a check runs.
 * @param {HTMLButtonElement} button @param {boolean} busy
 */
function setBusy(button, busy) {
  button.setAttribute("aria-disabled", String(busy));
}
const isBusy = (/** @type {HTMLElement} */ button) => button.getAttribute("aria-disabled") === "true";

/**
 * Disable a control for good (answered, revealed); if it had the focus, the focus moves to
 * `next` first (the result), never to <body>.
 * @param {HTMLInputElement|HTMLButtonElement} control @param {boolean} off @param {HTMLElement} next
 */
function lock(control, off, next) {
  if (off && control.ownerDocument.activeElement === control && !control.disabled) next.focus();
  control.disabled = off;
}

/**
 * Re-run `update` when any of `traits` changes; returns the cleanup for render().
 * @param {ExerciseModel} model @param {(keyof Model)[]} traits @param {() => void} update
 */
function watch(model, traits, update) {
  const events = traits.map((name) => `change:${name}`);
  for (const event of events) model.on(event, update);
  update();
  return () => { for (const event of events) model.off(event, update); };
}

/** @param {ExerciseModel} model @param {HTMLElement} root @returns {() => void} */
function renderCheck(model, root) {
  const task = h("p", { class: "ptl-ex-task" });
  const button = h("button", { type: "button", class: "ptl-ex-button" });
  // the feedback can be long: announced is the verdict; the feedback follows it on the page
  const { region, status } = liveRegion();
  const feedback = h("div", { class: "ptl-ex-feedback" });
  const reveal = h("button", { type: "button", class: "ptl-ex-button ptl-ex-secondary" }, "Show a reference solution");
  const solutionBox = h("div", { class: "ptl-ex-solution-box" });
  const solution = h("pre", { class: "ptl-ex-solution", "aria-label": "reference solution" });
  solutionBox.append(h("p", { class: "ptl-ex-solution-title" }, "Reference solution"), solution);
  button.addEventListener("click", () => { if (!isBusy(button)) model.send({ type: "check" }); });
  reveal.addEventListener("click", () => { if (!isBusy(reveal)) model.send({ type: "solution" }); });
  root.append(task, button, reveal, region, feedback, solutionBox);
  return watch(model, ["task", "label", "busy", "announcement", "status", "feedback", "solution_available", "solution"], () => {
    task.textContent = model.get("task");
    button.textContent = model.get("label");
    setBusy(button, model.get("busy"));
    // offered only after a first check; shown only once Python has revealed it
    const hide = !model.get("solution_available") || Boolean(model.get("solution"));
    if (hide && reveal.ownerDocument.activeElement === reveal) region.focus();
    reveal.hidden = hide;
    setBusy(reveal, model.get("busy"));
    solution.textContent = model.get("solution");
    solutionBox.hidden = !model.get("solution");
    status.textContent = model.get("announcement");
    root.dataset.status = model.get("status");
    feedback.textContent = model.get("feedback");
    feedback.hidden = !model.get("feedback");
  });
}

/** @param {ExerciseModel} model @param {HTMLElement} root @returns {() => void} */
function renderPredict(model, root) {
  const id = unique("ptl-ex-prediction");
  const prompt = h("label", { class: "ptl-ex-prompt", for: id });
  const input = h("textarea", { id, class: "ptl-ex-input", rows: "3" });
  const button = h("button", { type: "button", class: "ptl-ex-button" }, "Reveal the answer");
  const answer = h("div", { class: "ptl-ex-answer" });
  const { region, status } = liveRegion(answer);
  // after the reveal: how close was the prediction? (the student's own rating, kept as evidence)
  const rating = h("fieldset", { class: "ptl-ex-rating" });
  rating.append(h("legend", {}, "My prediction was"));
  const ratingName = unique("ptl-ex-rating");
  for (const [value, text] of [["right", "right"], ["partly", "partly right"], ["wrong", "wrong"]]) {
    const label = h("label", { class: "ptl-ex-choice-inline" });
    const radio = h("input", { type: "radio", name: ratingName, value });
    radio.addEventListener("change", () => { model.set("self_rating", value); model.save_changes(); });
    label.append(radio, document.createTextNode(` ${text}`));
    rating.append(label);
  }
  input.addEventListener("input", () => {
    model.set("prediction", input.value);
    model.save_changes();
  });
  button.addEventListener("click", () => {
    if (isBusy(button) || button.disabled) return;
    model.set("prediction", input.value);
    model.save_changes();
    // the text travels inside the intent too: ipywidgets holds a trait write back while an earlier
    // one is pending, and a message sent now would overtake it
    model.send({ type: "reveal", prediction: input.value });
  });
  root.append(prompt, input, button, region, rating);
  return watch(model, ["prompt", "prediction", "revealed", "answer", "announcement", "busy", "self_rating"], () => {
    rating.hidden = !model.get("revealed");
    rating.querySelectorAll("input").forEach((radio) => { radio.checked = radio.value === model.get("self_rating"); });
    prompt.textContent = model.get("prompt");
    if (input.value !== model.get("prediction")) input.value = model.get("prediction");
    const revealed = model.get("revealed");
    input.readOnly = revealed; // the prediction stays as it was before the answer was seen
    status.textContent = model.get("announcement");
    answer.textContent = model.get("answer");
    answer.hidden = !revealed;
    setBusy(button, model.get("busy"));
    lock(button, revealed, region); // the focus goes to the revealed answer
    root.dataset.status = revealed ? "revealed" : "";
  });
}

/** @param {ExerciseModel} model @param {HTMLElement} root @returns {() => void} */
function renderQuiz(model, root) {
  const name = unique("ptl-ex-quiz");
  const fieldset = h("fieldset", { class: "ptl-ex-choices" });
  const legend = h("legend");
  fieldset.append(legend);
  const button = h("button", { type: "button", class: "ptl-ex-button" }, "Check answer");
  const explanation = h("div", { class: "ptl-ex-explanation" });
  const { region, status } = liveRegion(explanation);
  // the choice travels inside the intent (a trait write may still be held back by ipywidgets)
  const check = () => {
    if (!isBusy(button) && !button.disabled) model.send({ type: "check", selected: model.get("selected") });
  };
  button.addEventListener("click", check);
  // a native radio group: Tab reaches it (the checked choice, else the first), arrow keys move
  // and choose, Space chooses; Enter answers with the choice made, as in a form
  fieldset.addEventListener("keydown", (e) => {
    const radio = /** @type {HTMLInputElement} */ (e.target);
    if (e.key !== "Enter" || notebookKey(e) || radio.type !== "radio" || radio.disabled) return;
    e.preventDefault();
    if (!radio.checked) {
      radio.checked = true;
      radio.dispatchEvent(new Event("change", { bubbles: true }));
    }
    check();
  });
  root.append(fieldset, button, region);
  let drawn = "";
  return watch(model, ["question", "choices", "selected", "answered", "correct", "explanation", "announcement", "busy",
                       "choice_notes", "answer_index"], () => {
    legend.textContent = model.get("question");
    const choices = model.get("choices");
    if (JSON.stringify(choices) !== drawn) {
      drawn = JSON.stringify(choices);
      for (const old of fieldset.querySelectorAll(".ptl-ex-choice")) old.remove();
      choices.forEach((/** @type {string} */ text, /** @type {number} */ index) => {
        const label = h("label", { class: "ptl-ex-choice" });
        const radio = h("input", { type: "radio", name, value: String(index) });
        radio.addEventListener("change", () => {
          model.set("selected", index);
          model.save_changes();
        });
        const note = h("span", { class: "ptl-ex-note" });
        label.append(radio, document.createTextNode(` ${text}`), note);
        fieldset.append(label);
      });
    }
    const answered = model.get("answered");
    const notes = model.get("choice_notes") || [];
    /** @type {NodeListOf<HTMLLabelElement>} */ (fieldset.querySelectorAll(".ptl-ex-choice")).forEach((label, index) => {
      const radio = /** @type {HTMLInputElement} */ (label.querySelector("input"));
      radio.checked = index === model.get("selected");
      lock(radio, answered, region); // locked: the first answer counts
      const note = /** @type {HTMLElement} */ (label.querySelector(".ptl-ex-note"));
      note.textContent = answered && notes[index] ? notes[index] : "";
      note.hidden = !note.textContent;
      label.dataset.verdict = !answered ? "" : index === model.get("answer_index") ? "right"
        : index === model.get("selected") ? "chosen-wrong" : "";
    });
    setBusy(button, model.get("busy"));
    lock(button, answered, region);
    status.textContent = model.get("announcement");
    explanation.textContent = model.get("explanation");
    explanation.hidden = !model.get("answered");
    root.dataset.status = model.get("answered") ? (model.get("correct") ? "passed" : "failed") : "";
  });
}

/** @param {ExerciseModel} model @param {HTMLElement} root @returns {() => void} */
function renderEvidence(model, root) {
  const button = h("button", { type: "button", class: "ptl-ex-button" });
  const { region, status } = liveRegion();
  button.addEventListener("click", () => { if (!isBusy(button)) model.send({ type: "save" }); });
  root.append(button, region);
  return watch(model, ["label", "announcement", "busy"], () => {
    button.textContent = model.get("label");
    setBusy(button, model.get("busy"));
    status.textContent = model.get("announcement");
  });
}

/** @type {Record<Model["kind"], (model: ExerciseModel, root: HTMLElement) => () => void>} */
const RENDERERS = { check: renderCheck, predict: renderPredict, quiz: renderQuiz, evidence: renderEvidence };

/** @type {import("@anywidget/types").Render<Model>} */
function render({ model, el }) {
  const unwatchKernel = watchKernel(model, el);
  const kind = model.get("kind");
  const root = h("section", { class: `ptl-ex ptl-ex-${kind}`, "data-kind": kind });
  keepKeys(root);
  const title = h("h4", { class: "ptl-ex-title" });
  root.append(title);
  el.append(root);
  const stopTitle = watch(model, ["title"], () => { title.textContent = model.get("title"); });
  const stop = (RENDERERS[kind] ?? (() => () => {}))(model, root);
  return () => {
    stopTitle();
    stop();
    root.remove();
    unwatchKernel();
  };
}

export default { render };
