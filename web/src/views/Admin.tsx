import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api/client";
import type { Project, User } from "../api/types";
import { ErrorNote, Loading, Section } from "../components/bits";
import { Time } from "../components/Time";

const ROLES = ["viewer", "member", "admin"];

/** For platform admins: projects, users and who has which role where. */
export default function Admin() {
  const client = useQueryClient();
  const projects = useQuery({ queryKey: ["projects"], queryFn: () => api<{ projects: Project[] }>("/corral/projects") });
  const users = useQuery({ queryKey: ["users"], queryFn: () => api<{ users: User[] }>("/corral/users") });
  const [projectName, setProjectName] = useState("");
  const [userName, setUserName] = useState("");
  const [token, setToken] = useState<string | null>(null);
  const refresh = () => {
    client.invalidateQueries({ queryKey: ["projects"] });
    client.invalidateQueries({ queryKey: ["users"] });
    client.invalidateQueries({ queryKey: ["whoami"] });
  };
  const call = useMutation({
    mutationFn: ({ path, method, body }: { path: string; method: string; body?: unknown }) => api<{ token?: string }>(path, { method, body }),
    onSuccess: (out) => {
      if (out?.token) setToken(out.token);
      refresh();
    },
  });
  const names = new Map((projects.data?.projects ?? []).map((p) => [p.project_id, p.name]));
  return (
    <div>
      <header className="page-head">
        <h1>Administration</h1>
      </header>
      <ErrorNote error={projects.error ?? users.error ?? call.error} />
      {token ? (
        <div className="notice" role="status">
          The new user's first token, shown only now: <code className="secret">{token}</code>
        </div>
      ) : null}
      <Section title="Projects">
        {projects.isPending ? <Loading /> : null}
        <ul className="plain">
          {(projects.data?.projects ?? []).map((p) => (
            <li key={p.project_id}>
              <strong>{p.name}</strong> <code className="muted">{p.project_id}</code> made <Time ms={p.created_at} />
            </li>
          ))}
        </ul>
        <form
          className="inline"
          onSubmit={(e) => {
            e.preventDefault();
            call.mutate({ path: "/corral/projects", method: "POST", body: { name: projectName } });
            setProjectName("");
          }}
        >
          <input aria-label="new project" placeholder="new project's name" value={projectName} onChange={(e) => setProjectName(e.target.value)} />
          <button type="submit" disabled={!projectName}>
            Create project
          </button>
        </form>
      </Section>
      <Section title="Users and memberships">
        {users.isPending ? <Loading /> : null}
        <table className="grid">
          <thead>
            <tr>
              <th>user</th>
              <th>roles</th>
              <th>give a role</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {(users.data?.users ?? []).map((u) => (
              <UserRow key={u.name} user={u} names={names} projects={projects.data?.projects ?? []} onCall={(path, method, body) => call.mutate({ path, method, body })} />
            ))}
          </tbody>
        </table>
        <form
          className="inline"
          onSubmit={(e) => {
            e.preventDefault();
            call.mutate({ path: "/corral/users", method: "POST", body: { name: userName } });
            setUserName("");
          }}
        >
          <input aria-label="new user" placeholder="new user's name" value={userName} onChange={(e) => setUserName(e.target.value)} />
          <button type="submit" disabled={!userName}>
            Create user
          </button>
        </form>
      </Section>
    </div>
  );
}

function UserRow({
  user,
  names,
  projects,
  onCall,
}: {
  user: User;
  names: Map<string, string>;
  projects: Project[];
  onCall: (path: string, method: string, body?: unknown) => void;
}) {
  const [project, setProject] = useState(projects[0]?.project_id ?? "");
  const [role, setRole] = useState("member");
  return (
    <tr>
      <td>
        {user.name} {user.is_admin ? <span className="badge off">platform admin</span> : null}
        <div className="muted small">
          since <Time ms={user.created_at} />
        </div>
      </td>
      <td>
        {Object.entries(user.projects).map(([pid, r]) => (
          <div key={pid}>
            {names.get(pid) ?? pid}: {r}{" "}
            <button
              className="link small"
              onClick={() =>
                window.confirm(`Take ${user.name} out of ${names.get(pid) ?? pid}? Their access keys for it are revoked.`) &&
                onCall(`/corral/projects/${pid}/members/${user.name}`, "DELETE")
              }
            >
              remove
            </button>
          </div>
        ))}
      </td>
      <td>
        <select aria-label={`project for ${user.name}`} value={project} onChange={(e) => setProject(e.target.value)}>
          {projects.map((p) => (
            <option key={p.project_id} value={p.project_id}>
              {p.name}
            </option>
          ))}
        </select>
        <select aria-label={`role for ${user.name}`} value={role} onChange={(e) => setRole(e.target.value)}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
        <button onClick={() => onCall(`/corral/projects/${project}/members/${user.name}`, "PUT", { role })}>Set</button>
      </td>
      <td>
        <button className="danger" onClick={() => window.confirm(`Disable ${user.name}? Every key and token of theirs stops.`) && onCall(`/corral/users/${user.name}`, "DELETE")}>
          Disable
        </button>
      </td>
    </tr>
  );
}
