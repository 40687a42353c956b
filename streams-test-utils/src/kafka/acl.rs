//! ACLs on the test broker, for tests of what an application may and may not do.
//!
//! rust-rdkafka has no ACL admin API, so this module speaks the two Kafka requests it needs
//! itself, over a plain TCP connection: `CreateAcls` and `DescribeAcls` (version 2, the
//! first flexible one, which every broker from Apache Kafka 2.4 to 4.x serves). Send them to
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

use super::{TestKafkaError, TestResult, timeout_error};
use wire::{Connection, Reader, put_compact_string, put_uvarint};

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
    let mut body = Vec::new();
    put_uvarint(&mut body, bindings.len() as u64 + 1);
    for b in bindings {
        body.push(b.resource_type.code() as u8);
        put_compact_string(&mut body, Some(&b.name));
        body.push(b.pattern.code() as u8);
        put_compact_string(&mut body, Some(&b.principal));
        put_compact_string(&mut body, Some("*"));
        body.push(b.operation.code() as u8);
        body.push(ALLOW as u8);
        body.push(0); // tagged fields
    }
    body.push(0);
    let response = conn.call(CREATE_ACLS, &body)?;
    let mut r = Reader::new(&response);
    let _throttle = r.i32()?;
    let results = r.compact_len()?;
    for i in 0..results {
        let code = r.i16()?;
        let message = r.compact_string()?;
        r.skip_tagged()?;
        if code != 0 {
            let what = bindings.get(i).map_or_else(String::new, ToString::to_string);
            return Err(TestKafkaError::Failed {
                what: format!("CreateAcls ({what})"),
                detail: format!("error code {code}: {}", message.unwrap_or_default()),
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

fn describe_on(conn: &mut Connection) -> TestResult<Vec<AclBinding>> {
    // Filters: any resource type, any name, any pattern, any principal, any host, any
    // operation, any permission.
    let mut body = vec![1u8];
    put_compact_string(&mut body, None);
    body.push(1);
    put_compact_string(&mut body, None);
    put_compact_string(&mut body, None);
    body.extend([1u8, 1u8, 0u8]);
    let response = conn.call(DESCRIBE_ACLS, &body)?;
    let mut r = Reader::new(&response);
    let _throttle = r.i32()?;
    let code = r.i16()?;
    let message = r.compact_string()?;
    if code != 0 {
        return Err(TestKafkaError::Failed {
            what: "DescribeAcls".into(),
            detail: format!("error code {code}: {}", message.unwrap_or_default()),
        });
    }
    let mut out = Vec::new();
    for _ in 0..r.compact_len()? {
        let resource_type = r.i8()?;
        let name = r.compact_string()?.unwrap_or_default();
        let pattern = r.i8()?;
        for _ in 0..r.compact_len()? {
            let principal = r.compact_string()?.unwrap_or_default();
            let _host = r.compact_string()?;
            let operation = r.i8()?;
            let permission = r.i8()?;
            r.skip_tagged()?;
            if let (Some(t), Some(p), Some(op), true) = (
                ResourceType::of(resource_type),
                PatternType::of(pattern),
                Operation::of(operation),
                permission == ALLOW,
            ) {
                out.push(AclBinding::new(t, &name, p, &principal, op));
            }
        }
        r.skip_tagged()?;
    }
    Ok(out)
}
