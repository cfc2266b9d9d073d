// Who is logged in, and which project the page is about.

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from "react";
import { useParams } from "react-router";
import { api, getToken, onLoggedOut, setToken } from "./api/client";
import type { Whoami } from "./api/types";

interface Session {
  me: Whoami | null;
  loading: boolean;
  error: unknown;
  /** a message for the login page (why the user was logged out) */
  notice: string;
  login: (token: string) => Promise<Whoami>;
  logout: (notice?: string) => void;
  /** ask the server again (it could not be reached) */
  retry: () => void;
}

const Ctx = createContext<Session | null>(null);

export function SessionProvider({ children }: { children: ReactNode }) {
  const client = useQueryClient();
  const [token, setTokenState] = useState(getToken());
  const [notice, setNotice] = useState("");
  const who = useQuery({
    queryKey: ["whoami", token],
    queryFn: () => api<Whoami>("/corral/whoami"),
    enabled: !!token,
    staleTime: 60_000,
    retry: false,
  });
  const logout = useCallback(
    (message = "") => {
      setToken(null);
      setTokenState(null);
      setNotice(message);
      client.clear();
    },
    [client],
  );
  useEffect(() => onLoggedOut(() => logout("Your token is not valid any more (expired or revoked). Log in again.")), [logout]);
  const login = useCallback(
    async (value: string) => {
      const me = await api<Whoami>("/corral/whoami", { probe: true, token: value });
      setToken(value);
      setTokenState(value);
      setNotice("");
      client.setQueryData(["whoami", value], me);
      return me;
    },
    [client],
  );
  const value: Session = {
    me: token ? (who.data ?? null) : null,
    loading: !!token && who.isPending,
    error: who.error,
    notice,
    login,
    logout,
    retry: () => void who.refetch(),
  };
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useSession(): Session {
  const s = useContext(Ctx);
  if (!s) throw new Error("useSession outside SessionProvider");
  return s;
}

/** The project of the page (`/p/:pid/...`), with the caller's role in it. */
export function useProject(): { id: string; name: string; role: string; canAct: boolean; isAdmin: boolean } {
  const { pid = "" } = useParams();
  const { me } = useSession();
  const project = me?.projects.find((p) => p.project_id === pid);
  const role = project?.role ?? "";
  return {
    id: pid,
    name: project?.name ?? pid,
    role,
    canAct: role === "member" || role === "admin" || !!me?.is_admin,
    isAdmin: role === "admin" || !!me?.is_admin,
  };
}
