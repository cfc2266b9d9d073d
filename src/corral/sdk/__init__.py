"""The Python client of a corral server: `corral.sdk.client`.

Scripts, notebooks and the `corral` command talk to a server through it, over the
ModelArts-v2-compatible REST API; it imports nothing of the server (only the pure types
of `corral.domain`), so a machine that only submits and watches jobs needs no database,
executor or storage code:

    from corral.sdk import client

    with client.Client("http://127.0.0.1:8765", token="crl_...") as api:
        job = api.create_job({"metadata": {"name": "hello"},
                              "algorithm": {"command": "echo hello"}})
        job_id = job["metadata"]["id"]
        tail = client.LogTail(api, job_id, "worker-0")
        ended = client.follow(api, job_id, tail, lambda text: print(text, end=""))
        print(ended["status"]["phase"])  # Completed

Without `project_id` the client works in the server's default project; a token
(`corral token`) or an access key pair (`access_key=`, `secret_key=`) authenticates it.
Every error answer, and a server that cannot be reached, raises `client.ClientError`.
The official ModelArts SDK works against the same server too.
"""
