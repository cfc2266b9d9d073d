// Copying text for the user: the Clipboard API where the page may use it (https, or
// localhost), else the older copy command on a selected, hidden text area.

export async function copyText(text: string): Promise<void> {
  if (navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // refused (no permission, the page not focused): the older way may still work
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  try {
    if (!document.execCommand("copy")) throw new Error("The browser did not copy: select the text and copy it by hand.");
  } finally {
    area.remove();
  }
}
