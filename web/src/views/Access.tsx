import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api/client";
import type { Key, Token } from "../api/types";
import { ErrorNote, Loading, Section } from "../components/bits";
import { Time } from "../components/Time";
import { useProject } from "../session";

/** The caller's tokens, and the project's access keys (a project admin sees everyone's). */
export default function Access() {
  const project = useProject();
  const pid = project.id;
  const client = useQueryClient();
  const tokens = useQuery({ queryKey: ["tokens"], queryFn: () => api<{ tokens: Token[] }>("/corral/tokens") });
  const keys = useQuery({ queryKey: ["keys", pid], queryFn: () => api<{ keys: Key[] }>(`/corral/projects/${pid}/keys`) });
  const [secret, setSecret] = useState<string | null>(null);
  const [description, setDescription] = useState("");
  const newToken = useMutation({
    mutationFn: () => api<Token>("/corral/tokens", { method: "POST", body: { description: description || "made in the console" } }),
    onSuccess: (t) => {
      setSecret(`token ${t.token}`);
      client.invalidateQueries({ queryKey: ["tokens"] });
    },
  });
  const newKey = useMutation({
    mutationFn: () => api<Key>(`/corral/projects/${pid}/keys`, { method: "POST", body: { description: description || "made in the console" } }),
    onSuccess: (k) => {
      setSecret(`access key ${k.access_key}, secret key ${k.secret_key}`);
      client.invalidateQueries({ queryKey: ["keys", pid] });
    },
  });
  const revoke = useMutation({
    mutationFn: (path: string) => api(path, { method: "DELETE" }),
    onSettled: () => {
      client.invalidateQueries({ queryKey: ["tokens"] });
      client.invalidateQueries({ queryKey: ["keys", pid] });
    },
  });
  return (
    <div>
      <header className="page-head">
        <h1>Keys and tokens</h1>
      </header>
      <ErrorNote error={newToken.error ?? newKey.error ?? revoke.error} />
      {secret ? (
        <div className="notice" role="status">
          New {secret.split(" ")[0] === "token" ? "token" : "key pair"}, shown only now: <code className="secret">{secret}</code>
        </div>
      ) : null}
      <div className="inline">
        <input aria-label="description" placeholder="what it is for" value={description} onChange={(e) => setDescription(e.target.value)} />
        <button onClick={() => newToken.mutate()}>New token</button>
        <button onClick={() => newKey.mutate()}>New access key for {project.name}</button>
      </div>
      <Section title="Your tokens">
        {tokens.isPending ? <Loading /> : <ErrorNote error={tokens.error} />}
        <table className="grid">
          <tbody>
            {(tokens.data?.tokens ?? []).map((t) => (
              <tr key={t.id}>
                <td>{t.description || <span className="muted">no description</span>}</td>
                <td>
                  made <Time ms={t.created_at} />
                </td>
                <td>{t.expires_at ? <>expires <Time ms={t.expires_at} /></> : "never expires"}</td>
                <td>{t.revoked_at ? "revoked" : <button className="link" onClick={() => window.confirm(`Revoke the token ${t.description || "with no description"}? Whatever uses it is refused from now on; this cannot be undone.`) && revoke.mutate(`/corral/tokens/${t.id}`)}>revoke</button>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <Section title={`Access keys of ${project.name}`}>
        {keys.isPending ? <Loading /> : <ErrorNote error={keys.error} />}
        <table className="grid">
          <tbody>
            {(keys.data?.keys ?? []).map((k) => (
              <tr key={k.access_key}>
                <td>
                  <code>{k.access_key}</code>
                </td>
                <td>{k.user_name}</td>
                <td>{k.description}</td>
                <td>
                  <Time ms={k.created_at} />
                </td>
                <td>
                  {k.revoked_at ? "revoked" : (
                    <button
                      className="link"
                      onClick={() =>
                        window.confirm(`Revoke the access key ${k.access_key}? Whatever signs with it is refused from now on; this cannot be undone.`) &&
                        revoke.mutate(`/corral/projects/${pid}/keys/${k.access_key}`)
                      }
                    >
                      revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
    </div>
  );
}
