import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { ErrorNote } from "../components/bits";
import { useSession } from "../session";

export function Login() {
  const { login, notice } = useSession();
  const [token, setToken] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [params] = useSearchParams();
  const navigate = useNavigate();

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const me = await login(token.trim());
      const next = params.get("next");
      navigate(next && next.startsWith("/") ? next : me.projects[0] ? `/p/${me.projects[0].project_id}/jobs` : "/", {
        replace: true,
      });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="login">
      <form onSubmit={submit}>
        <h1>corral</h1>
        <p className="muted">Log in with a corral token.</p>
        {notice ? <div className="notice">{notice}</div> : null}
        <label>
          Token
          <input
            name="token"
            type="password"
            autoComplete="off"
            autoFocus
            value={token}
            onChange={(e) => setToken(e.target.value)}
            placeholder="crl_…"
          />
        </label>
        <button type="submit" disabled={busy || !token.trim()}>
          {busy ? "Checking…" : "Log in"}
        </button>
        <ErrorNote error={error} />
        <p className="muted small">
          On the server's machine, <code>corral token</code> prints a new token of yours; an administrator gives new
          users their first one (<code>corral users create</code>). The token stays in this browser until you log out.
        </p>
      </form>
    </div>
  );
}
