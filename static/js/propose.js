// The propose form shows only the inputs of the chosen decision kind (without this
// script every input shows, and the server ignores those the kind does not use).
function showKindInputs() {
  const kind = document.getElementById("id_kind");
  if (!kind) return;
  for (const group of document.querySelectorAll(".kind-inputs[data-kinds]")) {
    group.hidden = !group.dataset.kinds.split(" ").includes(kind.value);
  }
}

// The text box for a source is for "another source" only: a chosen ticket's source is
// posted as source_choice, which the server takes first.
function showAnotherSource(focus) {
  const box = document.querySelector(".source-another-input");
  const another = document.getElementById("source-another");
  if (!box || !another) return;
  box.hidden = !another.checked;
  if (focus && another.checked) document.getElementById("id_source").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  showKindInputs();
  showAnotherSource(false);
});
document.addEventListener("change", (event) => {
  if (event.target.id === "id_kind") showKindInputs();
  if (event.target.name === "source_choice") showAnotherSource(true);
});
