"""The alerts' outbox (one send per alert and webhook: pending, delivered, failed) and their verdicts.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('alert_sends',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('alert_id', sa.Integer(), nullable=False),
    sa.Column('channel', sa.String(length=200), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_try_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('first_failed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.String(length=300), nullable=True),
    sa.Column('done_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['alert_id'], ['alerts.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('alert_id', 'channel', name='uq_alert_send')
    )
    with op.batch_alter_table('alert_sends', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_sends_alert_id'), ['alert_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_sends_next_try_at'), ['next_try_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_sends_state'), ['state'], unique=False)

    op.create_table('alert_verdicts',
    sa.Column('key', sa.String(length=400), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('severity', sa.Integer(), nullable=False),
    sa.Column('cause', sa.String(length=200), nullable=True),
    sa.Column('delta', sa.Float(), nullable=True),
    sa.Column('opened_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('said_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('alert_id', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('key')
    )


def downgrade() -> None:
    op.drop_table('alert_verdicts')
    with op.batch_alter_table('alert_sends', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_sends_state'))
        batch_op.drop_index(batch_op.f('ix_alert_sends_next_try_at'))
        batch_op.drop_index(batch_op.f('ix_alert_sends_alert_id'))
    op.drop_table('alert_sends')
