//! ACLs on the test broker, for tests of what an application may and may not do.
//!
//! rust-rdkafka has no ACL admin API, so this module sends the two Kafka requests it needs
//! itself, over a plain TCP connection: `CreateAcls` and `DescribeAcls` (version 2, the
//! first flexible one, which every broker from Apache Kafka 2.4 to 4.x serves), as
//! `kafka_protocol`'s generated messages. Send them to
//! a listener whose principal may alter the cluster: on the test broker that is the
//! PLAINTEXT listener, whose `User:ANONYMOUS` is a super user (see `docs/kafka-for-tests.md`,
//! "Secure mode").
//!
//! ```no_run
//! use std::time::Duration;
//! use streams_test_utils::kafka::acl::{self, AclBinding, Operation};
//!
//! let bindings = [AclBinding::topic_literal("User:streams", "orders", Operation::Read)];
//! acl::create_acls("127.0.0.1:9092", &bindings, Duration::from_secs(30))?;
//! # Ok::<(), streams_test_utils::kafka::TestKafkaError>(())
//! ```

#[cfg(test)]
mod tests;
mod wire;

use std::fmt;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{TestKafkaError, TestResult, timeout_error};
use wire::Connection;

/// The API key of `DescribeAcls`.
const DESCRIBE_ACLS: i16 = 29;
/// The API key of `CreateAcls`.
const CREATE_ACLS: i16 = 30;

/// The kind of resource an ACL is about (Kafka's `ResourceType` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// The cluster (the resource name is `kafka-cluster`).
    Cluster,
    /// A transactional id.
    TransactionalId,
}

impl ResourceType {
    fn code(self) -> i8 {
        match self {
            Self::Topic => 2,
            Self::Group => 3,
            Self::Cluster => 4,
            Self::TransactionalId => 5,
        }
    }

    fn of(code: i8) -> Option<Self> {
        [Self::Topic, Self::Group, Self::Cluster, Self::TransactionalId]
            .into_iter()
            .find(|t| t.code() == code)
    }
}

/// How an ACL's resource name matches (Kafka's `PatternType` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    /// The name as it is.
    Literal,
    /// Every name that starts with it.
    Prefixed,
}

impl PatternType {
    fn code(self) -> i8 {
        match self {
            Self::Literal => 3,
            Self::Prefixed => 4,
        }
    }

    fn of(code: i8) -> Option<Self> {
        match code {
            3 => Some(Self::Literal),
            4 => Some(Self::Prefixed),
            _ => None,
        }
    }
}

/// An operation an ACL allows (Kafka's `AclOperation` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// Every operation.
    All,
    /// Read (fetch, join a group, commit offsets).
    Read,
    /// Write (produce, transactions).
    Write,
    /// Create topics.
    Create,
    /// Delete topics, records or groups.
    Delete,
    /// Alter.
    Alter,
    /// Describe (metadata, offsets, find the coordinator).
    Describe,
    /// Describe configurations.
    DescribeConfigs,
    /// Alter configurations.
    AlterConfigs,
    /// Idempotent produce (cluster; brokers before 2.8 need it for idempotent producers).
    IdempotentWrite,
}

impl Operation {
    fn code(self) -> i8 {
        match self {
            Self::All => 2,
            Self::Read => 3,
            Self::Write => 4,
            Self::Create => 5,
            Self::Delete => 6,
            Self::Alter => 7,
            Self::Describe => 8,
            Self::DescribeConfigs => 10,
            Self::AlterConfigs => 11,
            Self::IdempotentWrite => 12,
        }
    }

    fn of(code: i8) -> Option<Self> {
        [
            Self::All,
            Self::Read,
            Self::Write,
            Self::Create,
            Self::Delete,
            Self::Alter,
            Self::Describe,
            Self::DescribeConfigs,
            Self::AlterConfigs,
            Self::IdempotentWrite,
        ]
        .into_iter()
        .find(|o| o.code() == code)
    }
}

/// Kafka's `AclPermissionType` code of ALLOW.
const ALLOW: i8 = 3;

/// One ALLOW ACL: `principal` may do `operation` on the resources matched, from any host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The resource name (or prefix); `kafka-cluster` for the cluster.
    pub name: String,
    /// How the name matches.
    pub pattern: PatternType,
    /// The principal, e.g. `User:streams`.
    pub principal: String,
    /// The operation allowed.
    pub operation: Operation,
}

impl AclBinding {
    /// An ACL on the topic `name`.
    pub fn topic_literal(principal: &str, name: &str, operation: Operation) -> Self {
        Self::new(
            ResourceType::Topic,
            name,
            PatternType::Literal,
            principal,
            operation,
        )
    }

    /// An ACL on every resource of `resource_type` whose name starts with `prefix`.
    pub fn prefixed(
        resource_type: ResourceType,
        principal: &str,
        prefix: &str,
        operation: Operation,
    ) -> Self {
        Self::new(resource_type, prefix, PatternType::Prefixed, principal, operation)
    }

    /// An ACL on the cluster.
    pub fn cluster(principal: &str, operation: Operation) -> Self {
        Self::new(
            ResourceType::Cluster,
            "kafka-cluster",
            PatternType::Literal,
            principal,
            operation,
        )
    }

    /// An ACL with every part given.
    pub fn new(
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: Operation,
    ) -> Self {
        Self {
            resource_type,
            name: name.to_owned(),
            pattern,
            principal: principal.to_owned(),
            operation,
        }
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} may {:?} {:?} {:?} `{}`",
            self.principal, self.operation, self.resource_type, self.pattern, self.name
        )
    }
}

/// The ACLs Kafka Streams documents for an application whose principal is `principal`:
///
/// | resource | pattern | operations |
/// |---|---|---|
/// | topics named `application_id*` (changelog and repartition topics) | prefixed | CREATE, READ, WRITE, DESCRIBE, DELETE, DESCRIBE_CONFIGS |
/// | consumer groups named `application_id*` | prefixed | READ, DESCRIBE |
/// | transactional ids named `application_id*` (exactly-once only) | prefixed | WRITE, DESCRIBE |
/// | each input topic | literal | READ |
/// | each output topic | literal | WRITE |
///
/// READ and WRITE imply DESCRIBE of the same resource. IDEMPOTENT_WRITE on the cluster is
/// not among them: since Apache Kafka 2.8 WRITE on a topic lets a producer be idempotent.
pub fn streams_application(
    principal: &str,
    application_id: &str,
    inputs: &[&str],
    outputs: &[&str],
    exactly_once: bool,
) -> Vec<AclBinding> {
    use Operation::*;
    let mut acls: Vec<AclBinding> = [Create, Read, Write, Describe, Delete, DescribeConfigs]
        .into_iter()
        .map(|op| AclBinding::prefixed(ResourceType::Topic, principal, application_id, op))
        .collect();
    acls.extend(
        [Read, Describe]
            .into_iter()
            .map(|op| AclBinding::prefixed(ResourceType::Group, principal, application_id, op)),
    );
    if exactly_once {
        acls.extend(
            [Write, Describe]
                .into_iter()
                .map(|op| AclBinding::prefixed(ResourceType::TransactionalId, principal, application_id, op)),
        );
    }
    acls.extend(
        inputs
            .iter()
            .map(|t| AclBinding::topic_literal(principal, t, Read)),
    );
    acls.extend(
        outputs
            .iter()
            .map(|t| AclBinding::topic_literal(principal, t, Write)),
    );
    acls
}

/// Creates `bindings` on the broker at `bootstrap` (the first address), then waits until the
/// broker lists them all, so that its authorizer applies them before this returns.
///
/// # Errors
/// A connection or protocol error, an ACL the broker refused (with its error code and
/// message), or `timeout` passing before the broker lists them.
pub fn create_acls(bootstrap: &str, bindings: &[AclBinding], timeout: Duration) -> TestResult<()> {
    if bindings.is_empty() {
        return Ok(());
    }
    let deadline = Instant::now() + timeout;
    let mut conn = Connection::open(bootstrap, timeout)?;
    let mut request = CreateAclsRequest::default();
    request.creations = bindings.iter().map(creation).collect();
    let response: CreateAclsResponse = conn.call(CREATE_ACLS, &request)?;
    for (i, result) in response.results.iter().enumerate() {
        if result.error_code != 0 {
            let what = bindings.get(i).map_or_else(String::new, ToString::to_string);
            return Err(TestKafkaError::Failed {
                what: format!("CreateAcls ({what})"),
                detail: format!(
                    "error code {}: {}",
                    result.error_code,
                    result.error_message.as_deref().unwrap_or_default()
                ),
            });
        }
    }
    loop {
        let listed = describe_on(&mut conn)?;
        let missing: Vec<&AclBinding> = bindings.iter().filter(|b| !listed.contains(b)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(timeout_error(
                format!("the broker to list the ACLs just created (missing: {missing:?})"),
                timeout,
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every ALLOW ACL the broker at `bootstrap` has (of the resource types [`ResourceType`]
/// knows).
///
/// # Errors
/// A connection or protocol error, or the broker's error.
pub fn describe_acls(bootstrap: &str, timeout: Duration) -> TestResult<Vec<AclBinding>> {
    describe_on(&mut Connection::open(bootstrap, timeout)?)
}

/// The `CreateAcls` entry of `b`: ALLOW from any host.
fn creation(b: &AclBinding) -> AclCreation {
    let mut c = AclCreation::default();
    c.resource_type = b.resource_type.code();
    c.resource_name = StrBytes::from_string(b.name.clone());
    c.resource_pattern_type = b.pattern.code();
    c.principal = StrBytes::from_string(b.principal.clone());
    c.host = StrBytes::from_static_str("*");
    c.operation = b.operation.code();
    c.permission_type = ALLOW;
    c
}

/// Kafka's filter code that matches any value (of a resource type, pattern type,
/// operation or permission type).
const ANY: i8 = 1;

/// A `DescribeAcls` request for every ACL: any resource, name, pattern, principal, host,
/// operation and permission (the message's defaults would filter on empty names).
fn describe_all() -> DescribeAclsRequest {
    let mut request = DescribeAclsRequest::default();
    request.resource_type_filter = ANY;
    request.resource_name_filter = None;
    request.pattern_type_filter = ANY;
    request.principal_filter = None;
    request.host_filter = None;
    request.operation = ANY;
    request.permission_type = ANY;
    request
}

fn describe_on(conn: &mut Connection) -> TestResult<Vec<AclBinding>> {
    let response: DescribeAclsResponse = conn.call(DESCRIBE_ACLS, &describe_all())?;
    if response.error_code != 0 {
        return Err(TestKafkaError::Failed {
            what: "DescribeAcls".into(),
            detail: format!(
                "error code {}: {}",
                response.error_code,
                response.error_message.as_deref().unwrap_or_default()
            ),
        });
    }
    let mut out = Vec::new();
    for resource in &response.resources {
        let (Some(t), Some(p)) = (
            ResourceType::of(resource.resource_type),
            PatternType::of(resource.pattern_type),
        ) else {
            continue;
        };
        for acl in &resource.acls {
            if let (Some(op), true) = (Operation::of(acl.operation), acl.permission_type == ALLOW) {
                out.push(AclBinding::new(t, &resource.resource_name, p, &acl.principal, op));
            }
        }
    }
    Ok(out)
}
