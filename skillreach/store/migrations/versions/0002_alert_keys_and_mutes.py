"""Alert keys (kind:skill:metric:cause, for de-duplication) and muted alerts.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('key', sa.String(length=400), nullable=True))
        batch_op.create_index(batch_op.f('ix_alerts_key'), ['key'], unique=False)

    op.create_table('alert_mutes',
    sa.Column('key', sa.String(length=400), nullable=False),
    sa.Column('until', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )


def downgrade() -> None:
    op.drop_table('alert_mutes')
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alerts_key'))
        batch_op.drop_column('key')
