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
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-mark-right]");
  if (!button) return;
  const choices = document.querySelectorAll("#mark-right-choices input[name=right]");
  const choice = Array.from(choices).find((input) => input.value === button.dataset.markRight);
  if (!choice) return;
  choice.checked = true;
  const cause = document.getElementById("close-cause");
  if (cause) cause.focus();
});
