"""Initial schema: studies, probe records, artifacts, baselines, catalog and model snapshots, alerts.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('catalog_snapshots',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('digest', sa.String(length=80), nullable=False),
    sa.Column('taken_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('catalog_snapshots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_catalog_snapshots_source'), ['source'], unique=False)

    op.create_table('model_snapshots',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('runtime', sa.String(length=64), nullable=False),
    sa.Column('alias', sa.String(length=128), nullable=False),
    sa.Column('resolved_id', sa.String(length=128), nullable=False),
    sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('model_snapshots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_snapshots_alias'), ['alias'], unique=False)

    op.create_table('studies',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('out_dir', sa.Text(), nullable=False),
    sa.Column('runtime', sa.String(length=64), nullable=False),
    sa.Column('model', sa.String(length=128), nullable=True),
    sa.Column('resolved_model', sa.String(length=128), nullable=True),
    sa.Column('catalog_id', sa.String(length=128), nullable=False),
    sa.Column('catalog_digest', sa.String(length=80), nullable=False),
    sa.Column('queries_digest', sa.String(length=80), nullable=False),
    sa.Column('fingerprint', sa.String(length=128), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('flow_run_id', sa.String(length=64), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('headline', sa.JSON(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('studies', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_studies_fingerprint'), ['fingerprint'], unique=False)

    op.create_table('alerts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('event', sa.String(length=80), nullable=False),
    sa.Column('skill', sa.String(length=200), nullable=True),
    sa.Column('metric', sa.String(length=64), nullable=True),
    sa.Column('delta', sa.Float(), nullable=True),
    sa.Column('interval_lo', sa.Float(), nullable=True),
    sa.Column('interval_hi', sa.Float(), nullable=True),
    sa.Column('baseline_id', sa.String(length=200), nullable=True),
    sa.Column('run_link', sa.Text(), nullable=True),
    sa.Column('study_id', sa.String(length=64), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('delivery', sa.String(length=32), nullable=False),
    sa.Column('delivered', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alerts_study_id'), ['study_id'], unique=False)

    op.create_table('artifacts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('study_id', sa.String(length=64), nullable=False),
    sa.Column('digest', sa.String(length=80), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('schema_version', sa.Integer(), nullable=False),
    sa.Column('body', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_artifacts_digest'), ['digest'], unique=False)
        batch_op.create_index(batch_op.f('ix_artifacts_study_id'), ['study_id'], unique=False)

    op.create_table('baselines',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('baseline_id', sa.String(length=200), nullable=False),
    sa.Column('skill', sa.String(length=200), nullable=False),
    sa.Column('model', sa.String(length=128), nullable=True),
    sa.Column('runtime', sa.String(length=64), nullable=True),
    sa.Column('corpus_version', sa.Text(), nullable=True),
    sa.Column('skill_version', sa.String(length=128), nullable=True),
    sa.Column('study_id', sa.String(length=64), nullable=True),
    sa.Column('record', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('baselines', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_baselines_baseline_id'), ['baseline_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_baselines_skill'), ['skill'], unique=False)

    op.create_table('catalog_snapshot_entries',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('snapshot_id', sa.Integer(), nullable=False),
    sa.Column('skill', sa.String(length=200), nullable=False),
    sa.Column('content_digest', sa.String(length=80), nullable=False),
    sa.ForeignKeyConstraint(['snapshot_id'], ['catalog_snapshots.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('snapshot_id', 'skill', name='uq_snapshot_skill')
    )
    with op.batch_alter_table('catalog_snapshot_entries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_catalog_snapshot_entries_snapshot_id'), ['snapshot_id'], unique=False)

    op.create_table('probe_records',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('study_id', sa.String(length=64), nullable=False),
    sa.Column('query_id', sa.String(length=200), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sa.String(length=128), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('cost_usd', sa.Float(), nullable=True),
    sa.Column('record', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('study_id', 'query_id', 'attempt', name='uq_probe_pair')
    )
    with op.batch_alter_table('probe_records', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_probe_records_study_id'), ['study_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('probe_records', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_probe_records_study_id'))

    op.drop_table('probe_records')
    with op.batch_alter_table('catalog_snapshot_entries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_catalog_snapshot_entries_snapshot_id'))

    op.drop_table('catalog_snapshot_entries')
    with op.batch_alter_table('baselines', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_baselines_skill'))
        batch_op.drop_index(batch_op.f('ix_baselines_baseline_id'))

    op.drop_table('baselines')
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_artifacts_study_id'))
        batch_op.drop_index(batch_op.f('ix_artifacts_digest'))

    op.drop_table('artifacts')
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alerts_study_id'))

    op.drop_table('alerts')
    with op.batch_alter_table('studies', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_studies_fingerprint'))

    op.drop_table('studies')
    with op.batch_alter_table('model_snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_snapshots_alias'))

    op.drop_table('model_snapshots')
    with op.batch_alter_table('catalog_snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_catalog_snapshots_source'))

    op.drop_table('catalog_snapshots')
