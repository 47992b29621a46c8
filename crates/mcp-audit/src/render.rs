//! Human-readable text for audit and metadata reports.

use std::fmt::Write as _;

use crate::audit::{AuditReport, PinStatus, Target};
use crate::metadata::MetadataReport;

fn names(list: &[String]) -> String {
    if list.is_empty() {
        "(none)".to_owned()
    } else {
        list.join(", ")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The warnings an audit raises. Never empty while any tool is destructive, open-world,
/// unannotated or partially annotated.
pub fn warnings(report: &AuditReport) -> Vec<String> {
    let s = &report.surface;
    let mut out = Vec::new();
    if !s.unannotated.is_empty() {
        out.push(format!(
            "{} no annotations ({}): with the spec defaults each is a destructive, open-world write",
            plural(s.unannotated.len(), "tool declares", "tools declare"),
            names(&s.unannotated)
        ));
    }
    if !s.partially_annotated.is_empty() {
        out.push(format!(
            "{} a hint that matters unset ({}): each unset hint takes the spec default (not read-only, destructive, open-world); a read needs readOnlyHint and openWorldHint, any other tool all four",
            plural(s.partially_annotated.len(), "tool leaves", "tools leave"),
            names(&s.partially_annotated)
        ));
    }
    if s.destructive > 0 {
        out.push(format!(
            "{} ({})",
            plural(s.destructive, "destructive write", "destructive writes"),
            names(&s.destructive_tools)
        ));
    }
    if s.open_world > 0 {
        out.push(format!(
            "{} ({})",
            plural(s.open_world, "open-world tool", "open-world tools"),
            names(&s.open_world_tools)
        ));
    }
    out
}

/// The text report of an audit.
pub fn audit_text(report: &AuditReport) -> String {
    let mut out = String::new();
    let s = &report.surface;
    let target = match &report.target {
        Target::Stdio { command, env } if env.is_empty() => format!("stdio: {}", command.join(" ")),
        Target::Stdio { command, env } => {
            format!(
                "stdio: {} (with --env {})",
                command.join(" "),
                env.join(", ")
            )
        }
        Target::Http { url } => format!("http: {url}"),
    };
    let server = if report.server.name.is_empty() {
        "(no implementation info)".to_owned()
    } else {
        format!("{} {}", report.server.name, report.server.version)
    };
    let _ = writeln!(out, "Audited:              {target}");
    let _ = writeln!(
        out,
        "Server:               {server}, protocol {}",
        report.server.protocol_version
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "Tools:                {}", s.total);
    let _ = writeln!(out, "Read-only:            {}", s.read_only);
    let _ = writeln!(out, "Destructive:          {}", s.destructive);
    let _ = writeln!(out, "Open-world:           {}", s.open_world);
    let _ = writeln!(out, "Unannotated:          {}", s.unannotated.len());
    let _ = writeln!(out, "Partially annotated:  {}", s.partially_annotated.len());
    let _ = writeln!(
        out,
        "tools/list size:      {} bytes",
        report.tools_list_bytes
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "Additive writes:      {}", names(&s.additive_writes));
    let _ = writeln!(out, "Destructive writes:   {}", names(&s.destructive_tools));
    let _ = writeln!(out, "Open-world tools:     {}", names(&s.open_world_tools));
    let _ = writeln!(out, "Token-gated tools:    {}", names(&s.token_gated_tools));
    let tasks: Vec<String> = report
        .task_support
        .iter()
        .filter(|t| t.task_support != "forbidden")
        .map(|t| format!("{} ({})", t.tool, t.task_support))
        .collect();
    let _ = writeln!(out, "Task support:         {}", names(&tasks));
    let _ = writeln!(out, "Unannotated tools:    {}", names(&s.unannotated));
    let _ = writeln!(
        out,
        "Partially annotated:  {}",
        names(&s.partially_annotated)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Per tool (raw: as declared; effective: read with the spec defaults):"
    );
    for tool in &s.tools {
        let raw = tool.raw.as_ref().map_or_else(
            || "(none)".to_owned(),
            |a| serde_json::to_string(a).unwrap_or_default(),
        );
        let effective = serde_json::to_string(&tool.effective).unwrap_or_default();
        let gated = if tool.token_gated {
            ", token-gated"
        } else {
            ""
        };
        let task = report
            .task_support
            .iter()
            .find(|t| t.tool == tool.name)
            .map(|t| format!(", taskSupport: {}", t.task_support))
            .unwrap_or_default();
        let _ = writeln!(out, "  {} [{}{gated}{task}]", tool.name, tool.class);
        let _ = writeln!(out, "    raw:       {raw}");
        let _ = writeln!(out, "    effective: {effective}");
    }
    let _ = writeln!(out);
    let warnings = warnings(report);
    if warnings.is_empty() {
        let _ = writeln!(
            out,
            "Warnings: none (every tool declares the hints that matter for it; none is destructive or open-world)"
        );
    } else {
        let _ = writeln!(out, "Warnings:");
        for w in &warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    if let Some(contract) = &report.contract {
        let _ = writeln!(out);
        if contract.drift.is_empty() {
            let _ = writeln!(out, "Contract {}: no drift", contract.file.display());
        } else {
            let _ = writeln!(out, "Contract {}: DRIFT", contract.file.display());
            for d in &contract.drift {
                let _ = writeln!(out, "  - {}", d.message);
            }
        }
    }
    if let Some(path) = &report.written_contract {
        let _ = writeln!(out);
        let _ = writeln!(out, "Contract written to {}", path.display());
    }
    if let Some(pin) = &report.pin {
        let _ = writeln!(out);
        match pin.status {
            PinStatus::Created => {
                let _ = writeln!(
                    out,
                    "Pin {}: written ({})",
                    pin.file.display(),
                    plural(s.total, "tool", "tools")
                );
            }
            PinStatus::Unchanged => {
                let _ = writeln!(out, "Pin {}: unchanged", pin.file.display());
            }
            PinStatus::Changed => {
                let _ = writeln!(
                    out,
                    "Pin {}: CHANGED since it was pinned (file left as it was; delete it to pin afresh)",
                    pin.file.display()
                );
                for change in &pin.changes {
                    let _ = writeln!(out, "  - {change}");
                }
            }
        }
    }
    if report.strict && !(s.unannotated.is_empty() && s.partially_annotated.is_empty()) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "--strict: unannotated or partially annotated tools found"
        );
    }
    out
}

/// The text report of `mcp-audit metadata`.
pub fn metadata_text(report: &MetadataReport) -> String {
    let mut out = String::new();
    let m = &report.metadata;
    let list = |v: &Option<Vec<String>>| match v {
        None => "(not given)".to_owned(),
        Some(v) if v.is_empty() => "(empty)".to_owned(),
        Some(v) => v.join(", "),
    };
    let _ = writeln!(out, "Endpoint:               {}", report.endpoint);
    for attempt in &report.attempts {
        let _ = writeln!(
            out,
            "Asked:                  {} -> {}",
            attempt.url,
            attempt.status.unwrap_or_default()
        );
    }
    let _ = writeln!(out, "Document:               {}", report.document_url);
    let _ = writeln!(out, "resource:               {}", m.resource);
    let _ = writeln!(
        out,
        "authorization_servers:  {}",
        list(&m.authorization_servers)
    );
    let _ = writeln!(out, "scopes_supported:       {}", list(&m.scopes_supported));
    let _ = writeln!(
        out,
        "resource_name:          {}",
        m.resource_name.as_deref().unwrap_or("(not given)")
    );
    let get = match (&report.plain_get.status, &report.plain_get.error) {
        (Some(status), _) => format!("answers {status}"),
        (None, Some(e)) => format!("failed: {e}"),
        (None, None) => "no answer".to_owned(),
    };
    let _ = writeln!(
        out,
        "Plain GET on endpoint:  {get} ({})",
        if report.plain_get_is_405 {
            "405: yes"
        } else {
            "405: no"
        }
    );
    let _ = writeln!(out);
    if report.findings.is_empty() {
        let _ = writeln!(out, "Findings: none");
    } else {
        let _ = writeln!(out, "Findings:");
        for f in &report.findings {
            let _ = writeln!(out, "  - {f}");
        }
    }
    out
}
