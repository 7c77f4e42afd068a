"""``kube.preflight.missing``: its SelfSubjectAccessReviews go ``REVIEWS_IN_FLIGHT`` at a time
(all at once, each opened a TLS connection of its own at every start), and each permission is
still judged by its own review."""

from __future__ import annotations

import asyncio
from typing import Any

from lws_operator.kube import preflight
from lws_operator.kube.preflight import REVIEWS_IN_FLIGHT, Permission, missing


class Reviews:
    """Answers SelfSubjectAccessReviews: allowed unless the verb is ``delete``; counts how
    many are in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.asked: list[str] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        assert (method, path) == ("POST",
                                  "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        attributes = kwargs["body"]["spec"]["resourceAttributes"]
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.001)
        finally:
            self.in_flight -= 1
        self.asked.append(f"{attributes['verb']} {attributes['resource']}")
        return {"status": {"allowed": attributes["verb"] != "delete"}}


async def test_reviews_go_a_few_at_a_time_and_each_permission_gets_its_answer() -> None:
    wanted = preflight.needed_permissions(namespace="lws-system", controllers=True,
                                          lease_namespace="lws-system")
    wanted += [Permission("delete", "", "pods"), Permission("delete", "apps", "statefulsets")]
    kube = Reviews()
    denied = await missing(kube, wanted)  # type: ignore[arg-type]
    assert len(kube.asked) == len(wanted) > REVIEWS_IN_FLIGHT
    assert kube.most == REVIEWS_IN_FLIGHT
    assert denied == [p for p in wanted if p.verb == "delete"]
