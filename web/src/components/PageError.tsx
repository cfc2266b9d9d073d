// What a page shows instead of going blank when it fails to render: most often its code
// file did not arrive (see lib/load.tsx), which a new try or a reload mends.

import { Component, type ReactNode } from "react";
import { describe } from "../api/client";
import { isLoadError, renewFailedViews } from "../lib/load";

interface Props {
  children: ReactNode;
  /** the error is forgotten when this changes (the page's address: another page) */
  resetKey?: string;
}

interface State {
  error: unknown;
}

export class PageError extends Component<Props, State> {
  state: State = { error: null };

  static getDerivedStateFromError(error: unknown): State {
    return { error };
  }

  componentDidUpdate(before: Props) {
    if (this.state.error && before.resetKey !== this.props.resetKey) this.retry();
  }

  retry() {
    renewFailedViews();
    this.setState({ error: null });
  }

  render() {
    const { error } = this.state;
    if (!error) return this.props.children;
    const load = isLoadError(error);
    return (
      <div className="error page-error" role="alert">
        <p>
          {load
            ? "This page's code could not be loaded from the server. The server may be restarting, the network may have failed, or corral was upgraded since this page was opened (then reloading the page loads the new console)."
            : "This page failed to show, because of an error in the console."}
        </p>
        <p className="small">{describe(error)}</p>
        <p>
          <button onClick={() => this.retry()}>Try again</button>{" "}
          <button onClick={() => window.location.reload()}>Reload</button>
        </p>
      </div>
    );
  }
}
