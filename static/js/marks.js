// "Right" on an observation card picks it in the close form's "Which was right?" and moves
// to the cause: the mark is recorded with the close. Shown only where the form is (the
// evidence is cached for every reader; the work panel is swapped by htmx).
function showMarkButtons() {
  const form = document.getElementById("mark-right-choices");
  document.querySelectorAll("button[data-mark-right]").forEach((button) => {
    button.hidden = !form;
  });
}
document.addEventListener("DOMContentLoaded", showMarkButtons);
document.addEventListener("htmx:afterSwap", showMarkButtons);
function pickRight(value) {
  const choices = document.querySelectorAll("#mark-right-choices input[name=right]");
  const choice = Array.from(choices).find((input) => input.value === value);
  if (!choice) return;
  choice.checked = true;
  const cause = document.getElementById("close-cause");
  if (cause) cause.focus();
}
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-mark-right]");
  if (button) pickRight(button.dataset.markRight);
});
// Keys: 1 to 9 mark the observation in that column right, 0 none of them.
document.addEventListener("keydown", (event) => {
  const target = event.target;
  const typing = target && (target.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(target.tagName));
  if (typing || event.ctrlKey || event.metaKey || event.altKey || !/^[0-9]$/.test(event.key)) return;
  if (event.key === "0") {
    pickRight("none");
    return;
  }
  const buttons = document.querySelectorAll("button[data-mark-right]");
  const button = buttons[Number(event.key) - 1];
  if (button && !button.hidden) pickRight(button.dataset.markRight);
});
