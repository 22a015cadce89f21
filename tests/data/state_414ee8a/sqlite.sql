CREATE TABLE processed_events (
	event_id VARCHAR(200) NOT NULL, 
	platform VARCHAR(20) NOT NULL, 
	received_at DATETIME NOT NULL, 
	PRIMARY KEY (event_id)
);
CREATE INDEX ix_processed_events_received_at ON processed_events (received_at);
CREATE TABLE feedback (
	id INTEGER NOT NULL, 
	trace_id VARCHAR(64) NOT NULL, 
	platform VARCHAR(20) NOT NULL, 
	user_id VARCHAR(200) NOT NULL, 
	value VARCHAR(20) NOT NULL, 
	comment TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_feedback_trace_user UNIQUE (trace_id, user_id)
);
CREATE INDEX ix_feedback_trace_id ON feedback (trace_id);
CREATE TABLE pending_actions (
	"key" VARCHAR(100) NOT NULL, 
	tool VARCHAR(100) NOT NULL, 
	args TEXT NOT NULL, 
	requester VARCHAR(200) NOT NULL, 
	platform VARCHAR(20) NOT NULL, 
	channel_id VARCHAR(200) NOT NULL, 
	thread_id VARCHAR(200) NOT NULL, 
	summary TEXT NOT NULL, 
	status VARCHAR(20) NOT NULL, 
	result TEXT, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY ("key")
);
CREATE TABLE audit_log (
	id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	actor VARCHAR(200) NOT NULL, 
	platform VARCHAR(20) NOT NULL, 
	action VARCHAR(100) NOT NULL, 
	target VARCHAR(500) NOT NULL, 
	outcome VARCHAR(50) NOT NULL, 
	detail TEXT NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_audit_log_at ON audit_log (at);
CREATE TABLE sync_cursors (
	source VARCHAR(200) NOT NULL, 
	cursor TEXT NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (source)
);
CREATE TABLE sync_runs (
	id INTEGER NOT NULL, 
	source VARCHAR(200) NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	status VARCHAR(20) NOT NULL, 
	summary TEXT NOT NULL, 
	error TEXT NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_sync_runs_source ON sync_runs (source);
CREATE TABLE locks (
	name VARCHAR(200) NOT NULL, 
	owner VARCHAR(200) NOT NULL, 
	expires_at DATETIME NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE conversations (
	"key" VARCHAR(500) NOT NULL, 
	history TEXT NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY ("key")
);
CREATE TABLE scheduled_messages (
	"key" VARCHAR(200) NOT NULL, 
	platform VARCHAR(20) NOT NULL, 
	user_id VARCHAR(200) NOT NULL, 
	channel_id VARCHAR(200) NOT NULL, 
	at DATETIME NOT NULL, 
	text TEXT NOT NULL, 
	status VARCHAR(20) NOT NULL, 
	due_at DATETIME NOT NULL, 
	attempts INTEGER NOT NULL, 
	error TEXT NOT NULL, 
	owner VARCHAR(200) NOT NULL, 
	lease_until DATETIME, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY ("key")
);
CREATE INDEX ix_scheduled_messages_status_due ON scheduled_messages (status, due_at);
CREATE INDEX ix_scheduled_messages_user ON scheduled_messages (user_id, status);
CREATE TABLE group_members (
	source VARCHAR(200) NOT NULL, 
	group_name VARCHAR(300) NOT NULL, 
	email VARCHAR(320) NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (source, group_name, email)
);
CREATE INDEX ix_group_members_email ON group_members (email);
