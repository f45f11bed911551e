// @ts-check
// A slider that shares its module (slider.py): drawn by the module of the SliderModule `module` names.
/** @typedef {import("./slider.js").Model & { module: string }} Model */
/** @type {import("@anywidget/types").Render<Model>} */
async function render(props) {
  /** @type {import("@anywidget/types").ResolvedWidget<{ render: import("@anywidget/types").Render<Model> }>} */
  const shared = await props.host.getWidget(props.model.get("module"));
  return shared.exports.render(props);
}
export default { render };
