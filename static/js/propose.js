// The propose form shows only the inputs of the chosen decision kind (without this
// script every input shows, and the server ignores those the kind does not use).
function showKindInputs() {
  const kind = document.getElementById("id_kind");
  if (!kind) return;
  for (const group of document.querySelectorAll(".kind-inputs[data-kinds]")) {
    group.hidden = !group.dataset.kinds.split(" ").includes(kind.value);
  }
}
document.addEventListener("DOMContentLoaded", showKindInputs);
document.addEventListener("change", (event) => {
  if (event.target.id === "id_kind") showKindInputs();
});
