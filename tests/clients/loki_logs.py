"""Ships records to lockwatch's Loki push endpoint with python-logging-loki (Loki's JSON
body, one push per record), the way an application logs: noise, then lock failures with
their traceback in the line. The stream's `namespace` label names the lock namespace.
Arguments: the push URL and the bearer token. Prints the lines sent; exits non-zero on any refused push."""
import logging
import sys

import logging_loki


class LockNotOwnedError(Exception):
    pass


failed = []


class Handler(logging_loki.LokiHandler):
    lines = 0

    def emit(self, record):
        Handler.lines += self.format(record).count("\n") + 1
        super().emit(record)

    def handleError(self, record):
        failed.append(sys.exc_info()[1])


def main(url, token):
    handler = Handler(url=url, tags={"app": "billing", "namespace": "payout"}, version="1")
    handler.emitter.session.headers["Authorization"] = f"Bearer {token}"
    handler.emitter.session.headers["X-Scope-OrgID"] = "team-a"
    log = logging.getLogger("billing")
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    for i in range(6):
        log.info("invoice %d sent", i)
        if i % 3 == 0:
            try:
                raise LockNotOwnedError("Cannot release a lock that's no longer owned")
            except LockNotOwnedError:
                log.exception("releasing the lock failed")
    if failed:
        print(f"refused: {failed}", file=sys.stderr)
        sys.exit(1)
    print(f"lines={Handler.lines}")


main(sys.argv[1], sys.argv[2])
