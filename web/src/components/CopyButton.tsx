import { useEffect, useState } from "react";
import { describe } from "../api/client";
import { copyText } from "../lib/clipboard";

/** A button that copies `text`, and says for a moment that it did (or why it could not). */
export function CopyButton({ text, label }: { text: string; label: string }) {
  const [said, setSaid] = useState("");
  useEffect(() => {
    if (!said) return;
    const timer = setTimeout(() => setSaid(""), 2_000);
    return () => clearTimeout(timer);
  }, [said]);
  return (
    <>
      <button type="button" className="link" aria-label={label} onClick={() => copyText(text).then(() => setSaid("Copied"), (err) => setSaid(describe(err)))}>
        {said === "Copied" ? "Copied" : "Copy"}
      </button>
      {said && said !== "Copied" ? (
        <span className="muted small" role="alert">
          {said}
        </span>
      ) : null}
    </>
  );
}
