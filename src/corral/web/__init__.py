"""The web console: a single-page app, served by the server at `/console`.

The console is a client of corral's public REST API like the CLI and the SDK: it runs in
the browser and reads and acts only through the API, with the user's token. This package
only serves its built files (`static/`, built from `web/` in the repository), so it
imports nothing of the platform.
"""
