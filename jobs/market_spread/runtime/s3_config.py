"""The S3 settings of every component (Spark's S3A, delta-rs, boto3 and obstore), from the AWS
variables, and how long one request may take with its retries."""

from __future__ import annotations

from dataclasses import dataclass

from market_spread.runtime.settings import value


@dataclass(frozen=True)
class S3Config:
    """The S3 connection every component uses, from the AWS variables."""

    endpoint: str | None
    access_key: str | None
    secret_key: str | None
    region: str
    # The longest one request may take, its retries included: a third of the lease's safety margin
    # (runtime.lease: the holder stops committing `ttl / 3` before anyone else may take the lake),
    # so a commit of a few requests that began while the lease was proven ends before it lapses.
    request_seconds: float = 10 / 3

    @staticmethod
    def from_env() -> "S3Config":
        margin = value("MARKET_SPREAD_LEASE_SECONDS") / 3
        return S3Config(
            value("AWS_ENDPOINT_URL"),
            value("AWS_ACCESS_KEY_ID"),
            value("AWS_SECRET_ACCESS_KEY"),
            value("AWS_REGION"),
            request_seconds=margin / 3,
        )

    @property
    def plain_http(self) -> bool:
        return self.endpoint is not None and self.endpoint.lower().startswith("http://")

    def hadoop_conf(self) -> dict[str, str]:
        """Spark settings for the S3A connector: a non-AWS endpoint needs path-style requests; every
        request bounded by the lease (`s3a_bounds`)."""
        prefix = "spark.hadoop.fs.s3a."
        conf = {
            **{prefix + key: setting for key, setting in self.s3a_bounds().items()},
            prefix + "endpoint.region": self.region,
            # s3:// given to Spark by hand reads through S3A as well
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        }
        if self.endpoint:
            conf[prefix + "endpoint"] = self.endpoint
            conf[prefix + "path.style.access"] = "true"
            conf[prefix + "connection.ssl.enabled"] = "false" if self.plain_http else "true"
        if self.access_key and self.secret_key:
            conf[prefix + "access.key"] = self.access_key
            conf[prefix + "secret.key"] = self.secret_key
            conf[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return conf

    def s3a_bounds(self) -> dict[str, str]:
        """S3A's time-outs and retries (`fs.s3a.` keys of hadoop-aws 3.4.2), bounded as delta-rs's
        are: one request with its retries ends within `request_seconds`. Two tries, S3A's own retry
        policy's (the SDK's retries off, so the count is known), the wait between them at most three
        retry intervals (Hadoop's exponential back-off: the interval doubled, times 0.5 to 1.5), each
        try cut off by every time-out S3A has. Below 15 s hadoop-aws raises its time-outs to 15 s
        unless the JVM's floor is lowered (runtime.spark_jvm.bound_s3a_requests)."""
        interval, each = self.request_seconds / 10, self.s3a_try_seconds
        return {
            "attempts.maximum": "0",
            "retry.limit": "1",
            "retry.interval": _ms(interval),
            "retry.throttle.limit": "1",
            "retry.throttle.interval": _ms(interval),
            "connection.request.timeout": _ms(each),
            # A small file's PUT (a Delta commit through S3A is one) and each part of a large upload,
            # whose parts are 8 MB (not 64) so that one reaches the store within the time-out.
            "connection.part.upload.timeout": _ms(each),
            "multipart.size": "8M",
            "connection.timeout": _ms(each),
            "connection.establish.timeout": _ms(each),
            "connection.acquisition.timeout": _ms(each),
        }

    @property
    def s3a_try_seconds(self) -> float:
        """One S3A try's time-outs: two tries and the wait between them (three tenths) fit the bound."""
        return (self.request_seconds - 3 * self.request_seconds / 10) / 2

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs (object_store) options: its commits are put-if-absent on S3 (If-None-Match), and
        each request with its retries ends within `request_seconds`."""
        half = f"{self.request_seconds / 2:g}s"
        options = {"AWS_REGION": self.region, "timeout": half, "max_retries": "3", "retry_timeout": half}
        if self.endpoint:
            options.update(AWS_ENDPOINT_URL=self.endpoint, AWS_VIRTUAL_HOSTED_STYLE_REQUEST="false")
            if self.plain_http:
                options["AWS_ALLOW_HTTP"] = "true"
        if self.access_key and self.secret_key:
            options.update(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key)
        return options


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"
