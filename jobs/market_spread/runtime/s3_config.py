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
        """Spark settings for the S3A connector: a non-AWS endpoint needs path-style requests."""
        prefix = "spark.hadoop.fs.s3a."
        conf = {
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
